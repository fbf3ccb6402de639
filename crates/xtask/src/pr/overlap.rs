//! Pull requests the clone has fetched that change the files the patches touch. What is found
//! here is for the contributor; the pull request texts name related work from the patches' notes.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use anyhow::Result;
use git2::{Oid, Repository};

use crate::series::Patch;

use super::stack;

/// An open pull request that changes a file the patches change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    pub number: u64,
    /// Its head commit's summary.
    pub summary: String,
    pub files: Vec<String>,
    /// `None` when the whole series applies on top of it, else the conflict.
    pub conflict: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overlaps {
    pub current: Vec<Overlap>,
    /// Pull requests that changed these files from an older version than the base has:
    /// closed, or due a rebase.
    pub older: Vec<u64>,
}

/// The pull requests fetched as `refs/pull/*/head` or `refs/remotes/*/pr/*`, as far as the
/// objects tell without GitHub: one whose version of a file is in the base's history is merged
/// (GitHub squashes) or superseded, and left out; one that started from an older version of a
/// file than the base has is only named; for the others, whether the series applies on top.
pub fn find(
    repo: &Repository,
    base: Oid,
    touched: &[String],
    patches: &[Patch],
) -> Result<Overlaps> {
    let base_tree = repo.find_commit(base)?.tree()?;
    let blob =
        |tree: &git2::Tree<'_>, path: &str| tree.get_path(Path::new(path)).ok().map(|e| e.id());
    let past = past_versions(repo, base, touched)?;
    let mut found = Overlaps::default();
    for reference in repo.references()? {
        let reference = reference?;
        let Some(number) = reference.name().ok().and_then(pull_number) else {
            continue;
        };
        // A pull request whose objects were not fetched whole is left out.
        let Ok(head) = reference.peel_to_commit() else {
            continue;
        };
        let Ok(head_tree) = head.tree() else { continue };
        // Versions the base never had, found without walking history: a merged pull request,
        // or one that leaves these files be, has none.
        let novel: Vec<&String> = touched
            .iter()
            .filter(|path| {
                let theirs = blob(&head_tree, path);
                theirs != blob(&base_tree, path)
                    && theirs.is_none_or(|id| !past[*path].contains(&id))
            })
            .collect();
        if novel.is_empty() {
            continue;
        }
        let Ok(fork_tree) = repo
            .merge_base(base, head.id())
            .and_then(|fork| repo.find_commit(fork))
            .and_then(|c| c.tree())
        else {
            continue;
        };
        // The files the pull request itself changes.
        let changed: Vec<String> = novel
            .into_iter()
            .filter(|path| blob(&head_tree, path) != blob(&fork_tree, path))
            .cloned()
            .collect();
        if changed.is_empty() {
            continue;
        }
        if changed
            .iter()
            .any(|path| blob(&fork_tree, path) != blob(&base_tree, path))
        {
            found.older.push(number);
            continue;
        }
        let conflict = stack::apply_linear(repo, head.id(), patches)
            .err()
            .map(|err| first_line(&format!("{err:#}")).to_string());
        found.current.push(Overlap {
            number,
            summary: head.summary()?.unwrap_or_default().to_string(),
            files: changed,
            conflict,
        });
    }
    found.current.sort_by_key(|o| o.number);
    found.older.sort();
    Ok(found)
}

/// `refs/pull/7/head` and `refs/remotes/origin/pr/7` -> 7.
fn pull_number(name: &str) -> Option<u64> {
    if let Some(rest) = name.strip_prefix("refs/pull/") {
        return rest.strip_suffix("/head")?.parse().ok();
    }
    let (remote, number) = name.split_once("/pr/")?;
    remote
        .starts_with("refs/remotes/")
        .then(|| number.parse().ok())?
}

/// Every version each of `paths` has had along the base's first parents.
fn past_versions(
    repo: &Repository,
    base: Oid,
    paths: &[String],
) -> Result<HashMap<String, HashSet<Oid>>> {
    let mut past: HashMap<String, HashSet<Oid>> =
        paths.iter().map(|p| (p.clone(), HashSet::new())).collect();
    let mut walk = repo.revwalk()?;
    walk.push(base)?;
    walk.simplify_first_parent()?;
    for id in walk {
        let Ok(tree) = repo.find_commit(id?).and_then(|c| c.tree()) else {
            continue;
        };
        for (path, versions) in past.iter_mut() {
            if let Ok(entry) = tree.get_path(Path::new(path)) {
                versions.insert(entry.id());
            }
        }
    }
    Ok(past)
}

/// A conflict in a few words: the patch, the file and the hunk.
fn first_line(message: &str) -> &str {
    let line = message.lines().next().unwrap_or_default();
    match line.find(") expected") {
        Some(at) => &line[..at + 1],
        None => line,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn pull_numbers_come_from_either_ref_layout() {
        assert_eq!(super::pull_number("refs/pull/3731/head"), Some(3731));
        assert_eq!(super::pull_number("refs/remotes/origin/pr/12"), Some(12));
        assert_eq!(super::pull_number("refs/pull/3731/merge"), None);
        assert_eq!(super::pull_number("refs/heads/pr/3"), None);
    }
}
