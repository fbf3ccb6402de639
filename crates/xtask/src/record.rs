//! What `pr` made in a clone: for each branch, the patch it holds and the commit `pr` left at its
//! tip. The file lives in the clone's git folder, beside the branches it speaks of, so that
//! `pr --force-branch` can tell a commit made by hand from its own, and `format-patch` can tell
//! which patch a branch writes back.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use fs_err as fs;
use git2::{Oid, Repository};
use minijinja::context;
use serde::Deserialize;

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

/// The record as `templates/record.toml` writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    branch: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    patch: Option<String>,
    resolution: Option<String>,
    made: String,
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

/// Writes `record` into the clone's git folder, from `templates/record.toml`.
pub fn write(repo: &Repository, record: &Record) -> Result<()> {
    let branches = record.branches.iter().map(|(name, made)| {
        let (tip, written) = (made.tip.to_string(), made.written.map(|id| id.to_string()));
        context! { name, patch => made.patch, resolution => made.resolution, tip, written }
    });
    let branches: Vec<_> = branches.collect();
    let text = crate::template::render("record", context! { branches })? + "\n";
    let path = path(repo);
    Ok(fs::write(&path, text)?)
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
