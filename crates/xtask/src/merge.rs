//! One change merged into another tree file by file, as `git cherry-pick` and `git am -3` do:
//! each file three ways, from what it was before the change, what the tree holds, and what the
//! change made of it. The lines a change made then land where those lines are now.

use anyhow::{Context, Result};
use git2::{FileMode, MergeFileInput, Oid, Repository};

/// One file of a change: its blob before and after it (`None`: the file is absent then).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    pub before: Option<Oid>,
    pub after: Option<Oid>,
    /// The mode the file has after the change (a plain or an executable file).
    pub mode: FileMode,
}

/// A file whose change does not merge into the tree: its path, and the conflicting lines, with
/// git's markers, or a sentence where a whole file is at stake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub path: String,
    pub lines: String,
}

/// What merging a change into a tree gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Merged {
    /// The new tree.
    Tree(Oid),
    /// The tree holds the change already, every file of it: merging changes nothing.
    AlreadyThere,
    Conflicts(Vec<Conflict>),
}

/// Each file's change from the tree `from` to the tree `to`, both in `repo`.
pub fn changes(repo: &Repository, from: Oid, to: Oid) -> Result<Vec<FileChange>> {
    let diff = crate::git::diff_trees(repo, from, to)?;
    let present = |file: git2::DiffFile<'_>| Some(file.id()).filter(|id| !id.is_zero());
    let changes = diff.deltas().map(|delta| {
        let path = crate::git::path(&delta).context("a change without a path")?;
        Ok(FileChange {
            path: path.to_string_lossy().into_owned(),
            before: present(delta.old_file()),
            after: present(delta.new_file()),
            mode: match delta.new_file().mode() {
                FileMode::BlobExecutable => FileMode::BlobExecutable,
                _ => FileMode::Blob,
            },
        })
    });
    changes.collect()
}

/// Copies the blobs of `changes` from `from` into `to`, so that `to` can merge them.
pub fn copy_blobs(from: &Repository, to: &Repository, changes: &[FileChange]) -> Result<()> {
    let ids = changes.iter().flat_map(|c| [c.before, c.after]).flatten();
    for id in ids {
        let blob = from.find_blob(id)?;
        to.blob(blob.content())?;
    }
    Ok(())
}

/// `changes` merged into `tree`; every blob they name must be in `repo`.
pub fn merge(repo: &Repository, tree: Oid, changes: &[FileChange]) -> Result<Merged> {
    let base = repo.find_tree(tree)?;
    let mut update = git2::build::TreeUpdateBuilder::new();
    let (mut conflicts, mut changed) = (Vec::new(), false);
    for change in changes {
        let path = std::path::Path::new(&change.path);
        let ours = base.get_path(path).ok().map(|entry| entry.id());
        if ours == change.after {
            continue;
        }
        let content = |id: Oid| repo.find_blob(id).map(|blob| blob.content().to_vec());
        // The file's new blob (`None`: it goes), or the lines that conflict.
        let merged = match (change.before, ours, change.after) {
            (before, ours, after) if ours == before => Ok(after),
            (Some(before), Some(ours), Some(after)) => {
                let [before, ours, after] = [before, ours, after].map(content);
                let [before, ours, after] = [before?, ours?, after?];
                let path = change.path.as_str();
                let [a, o, t] = [&before, &ours, &after].map(|bytes| input(bytes, path));
                let mut options = git2::MergeFileOptions::new();
                options
                    .our_label("what it goes on")
                    .their_label("the change");
                let result = git2::merge_file(&a, &o, &t, Some(&mut options))?;
                if !result.is_automergeable() {
                    Err(conflicting_lines(result.content()))
                } else if result.content() == ours.as_slice() {
                    continue;
                } else {
                    Ok(Some(repo.blob(result.content())?))
                }
            }
            (None, _, _) => Err("the change adds the file, which exists with other content".into()),
            (_, None, _) => Err("the change edits the file, which does not exist".into()),
            _ => Err("the change deletes the file, whose content differs".into()),
        };
        match merged {
            Ok(Some(blob)) => update.upsert(path, blob, change.mode),
            Ok(None) => update.remove(path),
            Err(lines) => {
                let path = change.path.clone();
                conflicts.push(Conflict { path, lines });
                continue;
            }
        };
        changed = true;
    }
    if !conflicts.is_empty() {
        return Ok(Merged::Conflicts(conflicts));
    }
    if !changed {
        return Ok(Merged::AlreadyThere);
    }
    Ok(Merged::Tree(update.create_updated(repo, &base)?))
}

/// The conflicts, each as its path and its lines, for an error message.
pub fn show(conflicts: &[Conflict]) -> String {
    let shown = conflicts
        .iter()
        .map(|c| format!("\n{}:\n{}", c.path, c.lines));
    shown.collect()
}

fn input<'a>(bytes: &'a [u8], path: &str) -> MergeFileInput<'a> {
    let mut input = MergeFileInput::new();
    input.content(bytes).path(path);
    input
}

/// The first conflict of a merged file: git's markers, and up to `SHOWN` lines of each side with
/// the number of lines left out.
fn conflicting_lines(content: &[u8]) -> String {
    const SHOWN: usize = 8;
    let text = String::from_utf8_lossy(content);
    let lines = text.lines().skip_while(|line| !line.starts_with("<<<<<<<"));
    let mut shown = Vec::new();
    let mut side: Vec<&str> = Vec::new();
    let flush = |side: &mut Vec<&str>, shown: &mut Vec<String>| {
        shown.extend(side.iter().take(SHOWN).map(|line| format!("    | {line}")));
        if side.len() > SHOWN {
            shown.push(format!("    | ... ({} more lines)", side.len() - SHOWN));
        }
        side.clear();
    };
    for line in lines {
        if ["<<<<<<<", "=======", ">>>>>>>"]
            .iter()
            .any(|m| line.starts_with(m))
        {
            flush(&mut side, &mut shown);
            shown.push(format!("    | {line}"));
            if line.starts_with(">>>>>>>") {
                break;
            }
        } else {
            side.push(line);
        }
    }
    shown.join("\n")
}
