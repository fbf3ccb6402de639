//! What `pr` made in a clone: for each branch, the patch it holds and the commit `pr` left at its
//! tip. The file lives in the clone's git folder, beside the branches it speaks of, so that
//! `pr --force-branch` can tell a commit made by hand from its own, and `format-patch` can tell
//! which patch a branch writes back.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use fs_err as fs;
use git2::{Oid, Repository};
use serde::{Deserialize, Serialize};

use crate::fsutil::read_if_exists;

/// The record's name in the clone's git folder.
pub const FILE: &str = "sampler-stack.toml";

/// One branch `pr` made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Made {
    /// The number of the patch the branch proposes; `None` for a branch of the whole series.
    pub patch: Option<String>,
    /// The `[base]` whose resolution in `patches/on-<name>/` the branch was made from, which
    /// `format-patch` writes it back into.
    pub resolution: Option<String>,
    /// The commit `pr` left at the branch's tip.
    pub tip: Oid,
    /// The tip `format-patch` last wrote back into `patches/`, if any: the commits up to it are
    /// safe there, and `pr` may move the branch over them.
    pub written: Option<Oid>,
}

/// Every branch `pr` made in a clone, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    pub branches: BTreeMap<String, Made>,
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

/// The record's file, as serde reads and writes it.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    branch: BTreeMap<String, Entry>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolution: Option<String>,
    made: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    written: Option<String>,
}

/// The clone's record; empty if `pr` never made a branch there.
pub fn read(repo: &Repository) -> Result<Record> {
    let path = path(repo);
    let shown = path.display();
    // No file reads as an empty one: no branch.
    let text = read_if_exists(&path)?.unwrap_or_default();
    let file: File = toml_edit::de::from_str(&text).with_context(|| format!("{shown}"))?;
    let mut record = Record::default();
    for (name, entry) in file.branch {
        let commit = |id: &str| Oid::from_str(id).with_context(|| format!("{shown}: {name}"));
        let made = Made {
            tip: commit(&entry.made)?,
            written: entry.written.as_deref().map(commit).transpose()?,
            patch: entry.patch,
            resolution: entry.resolution,
        };
        record.branches.insert(name, made);
    }
    Ok(record)
}

/// Writes `record` into the clone's git folder, with serde, so that any branch name is quoted
/// as TOML needs.
pub fn write(repo: &Repository, record: &Record) -> Result<()> {
    let entry = |made: &Made| Entry {
        patch: made.patch.clone(),
        resolution: made.resolution.clone(),
        made: made.tip.to_string(),
        written: made.written.map(|id| id.to_string()),
    };
    let branch = record
        .branches
        .iter()
        .map(|(name, made)| (name.clone(), entry(made)));
    let file = File {
        branch: branch.collect(),
    };
    let text = format!("{HEADER}\n{}", toml_edit::ser::to_string_pretty(&file)?);
    Ok(fs::write(path(repo), text)?)
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
