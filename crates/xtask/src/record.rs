//! What `pr` made in a clone: for each branch, the patch it holds and the commit `pr` left at its
//! tip. The file lives in the clone's git folder, beside the branches it speaks of, so that
//! `pr --force-branch` can tell a commit made by hand from its own, and `format-patch` can tell
//! which patch a branch writes back.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use git2::{Oid, Repository};
use serde::{Deserialize, Serialize};

use crate::fsutil::read_if_exists;

/// The record's name in the clone's git folder.
pub const FILE: &str = "sampler-stack.toml";

/// One branch `pr` made, as the record's file holds it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Made {
    /// The number of the patch the branch proposes; `None` for a branch of the whole series.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// The rewrite whose resolution in `patches/on-<name>/` the branch was made from, which
    /// `format-patch` writes it back into.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(rename = "resolution")]
    pub rewrite: Option<String>,
    /// The commit `pr` left at the branch's tip (`made` in the file).
    #[serde(rename = "made", with = "oid")]
    pub tip: Oid,
    /// The tip `format-patch` last wrote back into `patches/`, if any: the commits up to it are
    /// safe there, and `pr` may move the branch over them.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "oid::option")]
    pub written: Option<Oid>,
}

/// Every branch `pr` made in a clone, by name (`[branch."<name>"]` in the file).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    #[serde(default, rename = "branch")]
    pub branches: BTreeMap<String, Made>,
}

/// A commit id as the file writes it: its 40 hex digits.
mod oid {
    use git2::Oid;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(id: &Oid, to: S) -> Result<S::Ok, S::Error> {
        to.collect_str(id)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Oid, D::Error> {
        Oid::from_str(&String::deserialize(from)?).map_err(D::Error::custom)
    }

    pub(crate) mod option {
        use git2::Oid;
        use serde::{de::Error, Deserialize, Deserializer, Serializer};

        pub(crate) fn serialize<S: Serializer>(id: &Option<Oid>, to: S) -> Result<S::Ok, S::Error> {
            match id {
                Some(id) => super::serialize(id, to),
                None => to.serialize_none(),
            }
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            from: D,
        ) -> Result<Option<Oid>, D::Error> {
            let id = Option::<String>::deserialize(from)?;
            id.map(|id| Oid::from_str(&id))
                .transpose()
                .map_err(D::Error::custom)
        }
    }
}

pub fn path(repo: &Repository) -> PathBuf {
    repo.path().join(FILE)
}

/// What the record's file says first.
const HEADER: &str = "\
# Written by `cargo xtask pr`: the branches it made in this clone, the patch each proposes
# (none: the whole series), the base whose resolution it was made from (if any), the commit it
# made at the tip, and the tip `format-patch` last wrote back. `pr --force-branch` refuses to
# move a branch that holds other commits.
";

/// The clone's record; empty if `pr` never made a branch there.
pub fn read(repo: &Repository) -> Result<Record> {
    let path = path(repo);
    // No file reads as an empty one: no branch.
    let text = read_if_exists(&path)?.unwrap_or_default();
    toml_edit::de::from_str(&text).with_context(|| format!("{}", path.display()))
}

/// Writes `record` into the clone's git folder, with serde, so that any branch name is quoted
/// as TOML needs.
pub fn write(repo: &Repository, record: &Record) -> Result<()> {
    let text = format!("{HEADER}\n{}", toml_edit::ser::to_string_pretty(record)?);
    crate::fsutil::write_whole(&path(repo), text)
}

/// The commits on `branch` that `pr` did not make: reachable from its tip but not from the tip
/// `pr` recorded for it, the tip `format-patch` wrote back, or `base`. Newest first.
pub fn hand_made(
    repo: &Repository,
    record: &Record,
    branch: &str,
    base: Oid,
) -> Result<Vec<(Oid, String)>> {
    let Ok(found) = repo.find_branch(branch, git2::BranchType::Local) else {
        return Ok(Vec::new());
    };
    let tip = found.get().peel_to_commit()?.id();
    let mut walk = repo.revwalk()?;
    walk.push(tip)?;
    walk.hide(base)?;
    if let Some(made) = record.branches.get(branch) {
        // A recorded commit that is gone (the branch was rewritten and collected) hides nothing.
        for id in std::iter::once(made.tip).chain(made.written) {
            if repo.find_commit(id).is_ok() {
                walk.hide(id)?;
            }
        }
    }
    let mut commits = Vec::new();
    for id in walk {
        let id = id?;
        commits.push((id, crate::git::subject(&repo.find_commit(id)?)?));
    }
    Ok(commits)
}
