//! The one way a change goes onto a tree, answered with an `Outcome`: a patch as `git am -3`
//! puts it (`patch`), as written or each file three ways, and a change between two trees merged
//! file by file as `git cherry-pick` does (`change`). A conflict is an outcome, not an error:
//! `pr` goes on without that patch, and the callers that cannot (`Outcome::or_conflict`) stop.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use git2::{ApplyOptions, FileMode, MergeFileInput, Oid, Repository};

use crate::series::{email_of, index_line_differs, Patch};

mod conflict;

use conflict::{conflicting_lines, OURS, THEIRS};
pub use conflict::{Conflict, FileConflict, REDO};

/// What putting a change onto a tree gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It went on, as written or merged three ways: the new tree.
    Applied { tree: Oid, three_way: bool },
    /// The tree holds the change already.
    AlreadyThere,
    /// It does not go on.
    Conflict(Conflict),
}

impl Outcome {
    /// The tree after the change, `before` when it held the change already, or the conflict as
    /// an error.
    pub fn or_conflict(self, before: Oid) -> Result<Oid> {
        match self {
            Outcome::Applied { tree, .. } => Ok(tree),
            Outcome::AlreadyThere => Ok(before),
            Outcome::Conflict(conflict) => anyhow::bail!("{conflict}"),
        }
    }
}

/// `patch` applied to `tree` as written; a hunk that fails shows the lines it expected and the
/// file's.
pub(crate) fn as_written(repo: &Repository, tree: Oid, patch: &Patch) -> Result<Outcome> {
    let diff = patch.diff()?;
    let base = repo.find_tree(tree)?;
    // The file and hunk libgit2 last reached, from its callbacks (that one failed): the file,
    // the hunk's number in it, and its `@@ ... @@` header.
    let reached = RefCell::new((None::<PathBuf>, 0_usize, None::<String>));
    let mut options = ApplyOptions::new();
    options.delta_callback(|delta| {
        let path = delta.and_then(|d| d.old_file().path().or(d.new_file().path()));
        *reached.borrow_mut() = (path.map(Path::to_path_buf), 0, None);
        true
    });
    options.hunk_callback(|found| {
        let mut reached = reached.borrow_mut();
        reached.1 += 1;
        reached.2 = found.map(|h| String::from_utf8_lossy(h.header()).trim_end().to_string());
        true
    });
    let err = match repo.apply_to_tree(&base, &diff, Some(&mut options)) {
        Ok(mut index) => {
            let tree = index.write_tree_to(repo)?;
            return Ok(Outcome::Applied {
                tree,
                three_way: false,
            });
        }
        Err(err) => err,
    };
    let (path, number, header) = reached.take();
    let patch_name = patch.file_name.clone();
    let Some(path) = path else {
        let why = err.message().to_string();
        return Ok(Outcome::Conflict(Conflict::Apply {
            patch: patch_name,
            why,
        }));
    };
    let file = path.display().to_string();
    let why = match header {
        Some(header) => match hunk_conflict(repo, &base, &diff, patch, &path, number, &header) {
            Ok(conflict) => return Ok(Outcome::Conflict(conflict)),
            Err(_) => format!("{file}: hunk {number} ({header}) does not apply"),
        },
        None if base.get_path(&path).is_err() => format!("{file} does not exist"),
        None => format!("{file}: {}", err.message()),
    };
    Ok(Outcome::Conflict(Conflict::Apply {
        patch: patch_name,
        why,
    }))
}

/// The hunk `number` (from 1) of `path` in `diff`, `patch`'s, that did not apply to `base`: the
/// lines it expected, and those the file has there.
fn hunk_conflict(
    repo: &Repository,
    base: &git2::Tree<'_>,
    diff: &git2::Diff<'_>,
    patch: &Patch,
    path: &Path,
    number: usize,
    header: &str,
) -> Result<Conflict> {
    let mut deltas = diff.deltas();
    let index = deltas.position(|d| d.old_file().path().or(d.new_file().path()) == Some(path));
    let index = index.context("no such file in the patch")?;
    let file_patch = git2::Patch::from_diff(diff, index)?.context("no patch for the file")?;
    let (found_hunk, line_count) = file_patch.hunk(number - 1)?;
    let lines = (0..line_count).map(|line| file_patch.line_in_hunk(number - 1, line));
    let lines = lines.collect::<Result<Vec<_>, _>>()?;
    let old = lines.iter().filter(|l| matches!(l.origin(), ' ' | '-'));
    let old = old.map(|l| String::from_utf8_lossy(l.content()).into_owned());
    let expected: Vec<String> = old.map(|l| l.trim_end_matches('\n').to_string()).collect();
    let blob = repo.find_blob(base.get_path(path)?.id())?;
    let text = String::from_utf8_lossy(blob.content());
    let start = found_hunk.old_start().max(1) as usize - 1;
    let found: Vec<String> = text
        .lines()
        .skip(start)
        .take(expected.len())
        .map(String::from)
        .collect();
    let differs = (0..expected.len()).find(|&i| found.get(i) != Some(&expected[i]));
    Ok(Conflict::Hunk {
        patch: patch.file_name.clone(),
        file: path.display().to_string(),
        number,
        header: header.to_string(),
        from: start + 1,
        differs: differs.unwrap_or(expected.len()),
        expected,
        found,
    })
}

/// Applies `patch` to `tree` as `git am -3` does: as written if its context matches, else each
/// file three ways, from the blobs that its `index` lines name (which must be in `repo`) and the
/// file `tree` holds. Without those blobs, it applies as written or is a conflict.
///
/// `known` are blobs that `repo` holds, looked up first: an in-memory object store finds an
/// object by its whole id alone.
pub fn patch(repo: &Repository, tree: Oid, patch: &Patch, known: &[Oid]) -> Result<Outcome> {
    let strict = as_written(repo, tree, patch)?;
    if matches!(strict, Outcome::Applied { .. }) {
        return Ok(strict);
    }
    let mut changes = Vec::new();
    for line in patch.index_lines() {
        let find = |hex: &str| -> Option<Option<Oid>> {
            if hex.bytes().all(|b| b == b'0') {
                return Some(None);
            }
            if let Some(id) = known.iter().find(|id| id.to_string().starts_with(hex)) {
                return Some(Some(*id));
            }
            let odb = repo.odb().ok()?;
            let short = Oid::from_str(hex).ok()?;
            odb.exists_prefix(short, hex.len()).ok().map(Some)
        };
        // Without the blobs it was written against, the patch applies as written or not at all.
        let (Some(before), Some(after)) = (find(&line.before), find(&line.after)) else {
            return Ok(strict);
        };
        changes.push(FileChange {
            path: line.path,
            before,
            after,
            mode: git2::FileMode::Blob,
        });
    }
    Ok(match change(repo, tree, &changes)? {
        Outcome::Conflict(Conflict::Merge { files, .. }) => Outcome::Conflict(Conflict::Merge {
            patch: Some(patch.file_name.clone()),
            files,
        }),
        outcome => outcome,
    })
}

/// `patch` moved onto `tree` (`patch`): the tree after it and the patch as it reads there, or
/// `None` where the tree holds its change already. The patch keeps its bytes where it applies as
/// written and its index lines name the blobs; otherwise its change and message are written again
/// from the trees. Fails on a conflict, which stops every caller.
pub fn move_onto(
    repo: &Repository,
    tree: Oid,
    patch: &Patch,
    known: &[Oid],
) -> Result<Option<(Oid, Patch)>> {
    let (after, three_way) = match self::patch(repo, tree, patch, known)? {
        Outcome::Applied { tree, three_way } => (tree, three_way),
        Outcome::AlreadyThere => return Ok(None),
        Outcome::Conflict(conflict) => anyhow::bail!("{conflict}"),
    };
    if !three_way && index_line_differs(repo, tree, after, patch)?.is_none() {
        return Ok(Some((after, patch.clone())));
    }
    let bytes = email_of(repo, tree, after, &patch.message)?;
    Ok(Some((after, Patch::new(patch.file_name.clone(), bytes)?)))
}

/// `tree`, then the tree after each of `patches`, applied as written in turn: the series as it
/// is written for that tree, so that every patch must apply.
pub fn in_turn(repo: &Repository, tree: Oid, patches: &[Patch]) -> Result<Vec<Oid>> {
    let mut trees = vec![tree];
    for patch in patches {
        let before = trees[trees.len() - 1];
        trees.push(as_written(repo, before, patch)?.or_conflict(before)?);
    }
    Ok(trees)
}

/// `patches` applied as written from `tree`, in `repo`: every blob the series gives, before and
/// after each patch, which `patch` merges from.
pub fn blobs(repo: &Repository, tree: Oid, patches: &[Patch]) -> Result<Vec<Oid>> {
    let trees = in_turn(repo, tree, patches)?;
    let blobs = trees
        .windows(2)
        .map(|pair| change_blobs(repo, pair[0], pair[1]));
    Ok(blobs.collect::<Result<Vec<_>>>()?.concat())
}

/// Every blob that the change from the tree `from` to the tree `to` reads or writes.
pub fn change_blobs(repo: &Repository, from: Oid, to: Oid) -> Result<Vec<Oid>> {
    let files = changes(repo, from, to)?.into_iter();
    Ok(files
        .flat_map(|c| c.before.into_iter().chain(c.after))
        .collect())
}

/// One file of a change: its blob before and after it (`None`: the file is absent then).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    pub before: Option<Oid>,
    pub after: Option<Oid>,
    /// The mode the file has after the change (a plain or an executable file).
    pub mode: FileMode,
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

/// `changes` merged into `tree`, each file three ways; every blob they name must be in `repo`. A
/// conflict says `in <paths>:` and shows each file's first conflicting lines.
pub fn change(repo: &Repository, tree: Oid, changes: &[FileChange]) -> Result<Outcome> {
    let base = repo.find_tree(tree)?;
    let mut update = git2::build::TreeUpdateBuilder::new();
    let (mut files, mut changed) = (Vec::new(), false);
    for change in changes {
        let path = std::path::Path::new(&change.path);
        let ours = base.get_path(path).ok().map(|entry| entry.id());
        if ours == change.after {
            continue;
        }
        let content = |id: Oid| repo.find_blob(id).map(|blob| blob.content().to_vec());
        // The file's new blob (`None`: it goes), or what conflicts.
        let merged = match (change.before, ours, change.after) {
            (before, ours, after) if ours == before => Ok(after),
            (Some(before), Some(ours), Some(after)) => {
                let [before, ours, after] = [before, ours, after].map(content);
                let [before, ours, after] = [before?, ours?, after?];
                let path = change.path.as_str();
                let [a, o, t] = [&before, &ours, &after].map(|bytes| input(bytes, path));
                let mut options = git2::MergeFileOptions::new();
                options.our_label(OURS).their_label(THEIRS);
                let result = git2::merge_file(&a, &o, &t, Some(&mut options))?;
                if !result.is_automergeable() {
                    Err(conflicting_lines(result.content()))
                } else if result.content() == ours.as_slice() {
                    continue;
                } else {
                    Ok(Some(repo.blob(result.content())?))
                }
            }
            (None, _, _) => Err(FileConflict::Whole(
                "the change adds the file, which exists with other content",
            )),
            (_, None, _) => Err(FileConflict::Whole(
                "the change edits the file, which does not exist",
            )),
            _ => Err(FileConflict::Whole(
                "the change deletes the file, whose content differs",
            )),
        };
        match merged {
            Ok(Some(blob)) => update.upsert(path, blob, change.mode),
            Ok(None) => update.remove(path),
            Err(conflict) => {
                files.push((change.path.clone(), conflict));
                continue;
            }
        };
        changed = true;
    }
    if !files.is_empty() {
        return Ok(Outcome::Conflict(Conflict::Merge { patch: None, files }));
    }
    if !changed {
        return Ok(Outcome::AlreadyThere);
    }
    let tree = update.create_updated(repo, &base)?;
    Ok(Outcome::Applied {
        tree,
        three_way: true,
    })
}

fn input<'a>(bytes: &'a [u8], path: &str) -> MergeFileInput<'a> {
    let mut input = MergeFileInput::new();
    input.content(bytes).path(path);
    input
}
