//! git2 helpers shared by `pr` and `format-patch`.

use std::path::Path;

use anyhow::{ensure, Context, Result};
use git2::{Diff, DiffDelta, Oid, Repository, Status, StatusOptions};

pub fn open(path: &Path) -> Result<Repository> {
    Repository::open(path).with_context(|| format!("{} is not a git repository", path.display()))
}

/// A commit's subject: the first paragraph of its message, on one line.
pub fn subject(commit: &git2::Commit) -> Result<String> {
    Ok(commit.summary()?.unwrap_or_default().to_string())
}

/// The commit that `spec` (a branch, tag or commit) names.
pub fn resolve(repo: &Repository, spec: &str) -> Result<Oid> {
    let object = repo.revparse_single(spec);
    let object = object.with_context(|| format!("`{spec}` names nothing in {}", show(repo)))?;
    let commit = object.peel_to_commit();
    let commit = commit.with_context(|| format!("`{spec}` is not a commit"))?;
    Ok(commit.id())
}

/// The paths under `pathspec` (all if `None`) that differ from HEAD, untracked ones included.
pub fn uncommitted(repo: &Repository, pathspec: Option<&str>) -> Result<Vec<String>> {
    let mut options = StatusOptions::new();
    options.include_untracked(true).recurse_untracked_dirs(true);
    if let Some(pathspec) = pathspec {
        options.pathspec(pathspec);
    }
    let statuses = repo.statuses(Some(&mut options))?;
    let changed = statuses.iter().filter(|e| e.status() != Status::CURRENT);
    let paths = changed.map(|e| e.path().unwrap_or("?").to_string());
    Ok(paths.collect())
}

/// Fails where `repo`'s work tree differs from HEAD, naming the first five paths (and `, ...`
/// after them if there are more), then `then`: what to do about it.
pub fn require_clean(repo: &Repository, then: &str) -> Result<()> {
    let changed = uncommitted(repo, None)?;
    let more = if changed.len() > 5 { ", ..." } else { "" };
    let shown = changed[..changed.len().min(5)].join(", ") + more;
    ensure!(
        changed.is_empty(),
        "{} has changes that are not committed ({shown}): {then}",
        show(repo)
    );
    Ok(())
}

/// The Rust files in `tree`, by path, with their text; each file is read as the iteration reaches it.
pub(crate) fn rust_files(
    repo: &Repository,
    tree: Oid,
) -> Result<impl Iterator<Item = Result<(String, String)>> + '_> {
    let mut files = Vec::new();
    repo.find_tree(tree)?
        .walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            let path = format!("{dir}{}", entry.name().unwrap_or_default());
            if path.ends_with(".rs") {
                files.push((path, entry.id()));
            }
            git2::TreeWalkResult::Ok
        })?;
    Ok(files.into_iter().map(|(path, id)| {
        let blob = repo.find_blob(id)?;
        Ok((path, String::from_utf8_lossy(blob.content()).into_owned()))
    }))
}

/// The diff from the tree `from` to the tree `to`.
pub fn diff_trees(repo: &Repository, from: Oid, to: Oid) -> Result<Diff<'_>> {
    let [from, to] = [from, to].map(|id| repo.find_tree(id));
    Ok(repo.diff_tree_to_tree(Some(&from?), Some(&to?), None)?)
}

/// The file a delta changes: its new path, or its old one if it was deleted.
pub fn path<'a>(delta: &DiffDelta<'a>) -> Option<&'a Path> {
    delta.new_file().path().or(delta.old_file().path())
}

/// The file of each delta of `diff`, as `path` names it.
pub fn paths<'a>(diff: &'a Diff<'_>) -> impl Iterator<Item = &'a Path> {
    diff.deltas().filter_map(|delta| path(&delta))
}

/// A commit id cut to 10 characters, for messages.
pub fn short(id: &str) -> &str {
    id.get(..10).unwrap_or(id)
}

/// The repository's work tree, or its git folder, for messages.
pub fn show(repo: &Repository) -> String {
    repo.workdir().unwrap_or(repo.path()).display().to_string()
}
