//! The `git format-patch` files in `patches/`, in apply order, read as `git am` reads them.

mod mail;
pub mod notes;
pub mod stack_file;

pub use mail::{parse_message, Message};

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use fs_err as fs;
use git2::{ApplyOptions, Diff, Oid, Repository};

use crate::merge;
use crate::resolutions::Resolutions;
use notes::Notes;
use stack_file::StackFile;

/// One `NNNN-<subject>.patch` file.
#[derive(Clone, Debug)]
pub struct Patch {
    pub file_name: String,
    pub bytes: Vec<u8>,
}

/// Everything `patches/` holds, read and checked once per command: nothing else reads the
/// patches, `stack.toml`, the notes or the resolutions.
#[derive(Clone, Debug)]
pub struct Series {
    /// Every patch, carried ones too, in apply order.
    pub patches: Vec<Patch>,
    pub stack: StackFile,
    /// Each patch's notes, by its file name: empty where it has none.
    pub notes: BTreeMap<String, Notes>,
    /// Each `[base]` of `stack.toml` with its resolutions and notes from `patches/on-<name>/`.
    pub resolutions: Vec<Resolutions>,
}

impl Series {
    /// `patches/` (`dir`), checked: every notes file and resolution belongs to a patch, and
    /// `stack.toml` names only patches there and no retired number.
    pub fn load(dir: &Path) -> Result<Series> {
        let patches = load_patches(dir)?;
        notes::check_paired(dir, &patches)?;
        let stack = stack_file::read(dir)?;
        stack.check(&patches)?;
        let resolutions = crate::resolutions::load(dir, &stack, &patches)?;
        let mut notes = BTreeMap::new();
        for patch in &patches {
            notes.insert(patch.file_name.clone(), notes::load(dir, patch)?);
        }
        Ok(Series {
            patches,
            stack,
            notes,
            resolutions,
        })
    }

    /// The notes of `patch`, one of the series.
    pub fn notes_of(&self, patch: &Patch) -> Notes {
        self.notes
            .get(&patch.file_name)
            .cloned()
            .unwrap_or_default()
    }

    /// Whether `patch` is carried: kept out of the pull requests.
    pub fn is_carried(&self, patch: &Patch) -> bool {
        self.stack.carried.contains_key(patch.number())
    }
}

/// The `.patch` files in `dir`, in apply order, each named after a number of its own.
fn load_patches(dir: &Path) -> Result<Vec<Patch>> {
    let names = crate::fsutil::names(dir)?;
    let mut patches = Vec::new();
    for file_name in names.into_iter().filter(|name| name.ends_with(".patch")) {
        // `Patch::number` relies on this.
        let name = file_name.as_bytes();
        if name.get(4) != Some(&b'-') || !name[..4].iter().all(u8::is_ascii_digit) {
            bail!("{file_name}: a patch's name must start with its four-digit number, as `0001-`");
        }
        let bytes = fs::read(dir.join(&file_name))?;
        patches.push(Patch { file_name, bytes });
    }
    if let Some([a, b]) = patches.windows(2).find(|p| p[0].number() == p[1].number()) {
        bail!("{} and {} share a number", a.file_name, b.file_name);
    }
    Ok(patches)
}

impl Patch {
    /// The patch's number, as in `0001`.
    pub fn number(&self) -> &str {
        &self.file_name[..4]
    }

    pub fn diff(&self) -> Result<Diff<'static>> {
        Diff::from_buffer(&self.bytes)
            .with_context(|| format!("{}: git cannot read the patch in it", self.file_name))
    }

    pub fn message(&self) -> Result<Message> {
        parse_message(&self.bytes).with_context(|| format!("in {}", self.file_name))
    }

    /// The patch's `index` lines, in order.
    pub fn index_lines(&self) -> Vec<IndexLine> {
        let text = String::from_utf8_lossy(&self.bytes);
        let mut path = None;
        let mut lines = Vec::new();
        for line in text.lines() {
            if let Some(names) = line.strip_prefix("diff --git a/") {
                path = names.split_once(" b/").map(|(_, new)| new.to_string());
            } else if let Some(ids) = line.strip_prefix("index ") {
                // A new or deleted file's mode line comes between its `diff --git` line and its
                // `index` line, so the path is taken here and not on the line after `diff`.
                let Some(path) = path.take() else { continue };
                let ids = ids.split(' ').next().unwrap_or_default();
                if let Some((before, after)) = ids.split_once("..") {
                    let (before, after) = (before.to_string(), after.to_string());
                    lines.push(IndexLine {
                        path,
                        before,
                        after,
                    });
                }
            }
        }
        lines
    }
}

/// Applies `patch` to `tree`; a hunk that fails shows the lines it expected and the file's.
pub fn apply(repo: &Repository, tree: Oid, patch: &Patch) -> Result<Oid> {
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
        Ok(mut index) => return Ok(index.write_tree_to(repo)?),
        Err(err) => err,
    };
    let (path, number, header) = reached.take();
    let Some(path) = path else {
        let text = format!("{} does not apply: {}", patch.file_name, err.message());
        return Err(DoesNotApply(text).into());
    };
    let file = path.display();
    let explain_hunk = |header: &str| -> Result<String> {
        let mut deltas = diff.deltas();
        let index = deltas.position(|d| d.old_file().path().or(d.new_file().path()) == Some(&path));
        let index = index.context("no such file in the patch")?;
        let patch = git2::Patch::from_diff(&diff, index)?.context("no patch for the file")?;
        let (found_hunk, line_count) = patch.hunk(number - 1)?;
        let lines = (0..line_count).map(|line| patch.line_in_hunk(number - 1, line));
        let lines = lines.collect::<Result<Vec<_>, _>>()?;
        let old = lines.iter().filter(|l| matches!(l.origin(), ' ' | '-'));
        let old = old.map(|l| String::from_utf8_lossy(l.content()).into_owned());
        let expected: Vec<String> = old.map(|l| l.trim_end_matches('\n').to_string()).collect();
        let blob = repo.find_blob(base.get_path(&path)?.id())?;
        let text = String::from_utf8_lossy(blob.content());
        let start = found_hunk.old_start().max(1) as usize - 1;
        let found: Vec<&str> = text.lines().skip(start).take(expected.len()).collect();
        // The first line that differs, marked `>` on both sides.
        let differs = (0..expected.len()).find(|&i| found.get(i) != Some(&expected[i].as_str()));
        let differs = differs.unwrap_or(expected.len());
        let mark = |i| if i == differs { '>' } else { '|' };
        let show = |(i, line): (usize, &str)| format!("\n    {} {line}", mark(i));
        let (line, first) = (start + 1, start + 1 + differs);
        let expected = expected.iter().map(String::as_str).enumerate();
        let expected: String = expected.map(show).collect();
        let found: String = found.into_iter().enumerate().map(show).collect();
        Ok(format!(
            "{file}: hunk {number} ({header}) differs first at line {first} (>); it expected, \
             from line {line}:{expected}\nbut the file has:{found}"
        ))
    };
    let detail = match header {
        Some(header) => explain_hunk(&header)
            .unwrap_or_else(|_| format!("{file}: hunk {number} ({header}) does not apply")),
        None if base.get_path(&path).is_err() => format!("{file} does not exist"),
        None => format!("{file}: {}", err.message()),
    };
    let text = format!("{} does not apply: {detail}\n{REDO}", patch.file_name);
    Err(DoesNotApply(text).into())
}

/// Why a patch does not go onto a tree: it does not apply and cannot be merged three ways, or
/// the merge conflicts. The text names the patch and the file, shows the lines of both sides,
/// and says how to redo the patch. `pr` goes on without that patch; every other caller stops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoesNotApply(pub String);

impl std::fmt::Display for DoesNotApply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DoesNotApply {}

/// How to redo a patch that no longer applies, said with the failure.
pub const REDO: &str = "to redo it: in a clone of candle, `git checkout -b redo <base>` and \
    `git am -3 <workspace>/patches/*.patch` (resolve, `git am --continue`), then `cargo xtask \
    format-patch --candle <clone> --branch redo`";

/// One `index <before>..<after>` line of a patch: the blobs, abbreviated, that the file named
/// by the `diff --git` line above it has before and after the patch (zeros: no file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexLine {
    pub path: String,
    pub before: String,
    pub after: String,
}

/// Fails unless each `index` line of `patch` names the blobs its file has in `before` and
/// `after`, the trees just before and after the patch in the series.
pub fn check_index_lines(repo: &Repository, before: Oid, after: Oid, patch: &Patch) -> Result<()> {
    let [before, after] = [before, after].map(|id| repo.find_tree(id));
    let (before, after) = (before?, after?);
    let id_at = |tree: &git2::Tree<'_>, path: &str| {
        let entry = tree.get_path(Path::new(path)).ok();
        entry.map_or("0".repeat(40), |e| e.id().to_string())
    };
    for line in patch.index_lines() {
        for (side, named, tree) in [
            ("before", &line.before, &before),
            ("after", &line.after, &after),
        ] {
            let real = id_at(tree, &line.path);
            if !real.starts_with(named.as_str()) {
                bail!(
                    "{}: its index line names {named} as {} {side} it, but the series gives {}: \
                     write it back with `cargo xtask format-patch`, which writes the blobs the \
                     series gives",
                    patch.file_name,
                    line.path,
                    &real[..named.len().clamp(7, 40)],
                );
            }
        }
    }
    Ok(())
}

/// Applies `patch` to `tree` as `git am -3` does: as written if its context matches, else each
/// file three ways, from the blobs that its `index` lines name (which must be in `repo`) and the
/// file `tree` holds. Fails with `DoesNotApply` on a conflict or where the blobs are missing.
///
/// `known` are blobs that `repo` holds, looked up first: an in-memory object store finds an
/// object by its whole id alone.
pub fn apply_three_way(
    repo: &Repository,
    tree: Oid,
    patch: &Patch,
    known: &[Oid],
) -> Result<Applied> {
    let strict = match apply(repo, tree, patch) {
        Ok(after) => return Ok(Applied::AsWritten(after)),
        Err(err) => err,
    };
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
            return Err(strict);
        };
        changes.push(merge::FileChange {
            path: line.path,
            before,
            after,
            mode: git2::FileMode::Blob,
        });
    }
    match merge::merge(repo, tree, &changes)? {
        merge::Merged::Tree(after) => Ok(Applied::ThreeWay(after)),
        merge::Merged::AlreadyThere => Ok(Applied::AlreadyThere),
        merge::Merged::Conflicts(conflicts) => {
            let paths: Vec<&str> = conflicts.iter().map(|c| c.path.as_str()).collect();
            let text = format!(
                "{} conflicts with the tree it goes on, in {}:{}\n{REDO}",
                patch.file_name,
                paths.join(", "),
                merge::show(&conflicts)
            );
            Err(DoesNotApply(text).into())
        }
    }
}

/// What became of a patch carried onto another tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Carried {
    /// It applies as written and its index lines name the blobs: its bytes stay.
    Unchanged,
    /// Merged three ways, or its index lines named other blobs: its change and message, written
    /// again from the trees.
    Rewritten(Vec<u8>),
    /// The tree holds its change already.
    AlreadyThere,
}

/// `patch` carried onto `tree` (`apply_three_way`): the tree after it, and what became of it.
pub fn carry(repo: &Repository, tree: Oid, patch: &Patch, known: &[Oid]) -> Result<(Oid, Carried)> {
    let applied = apply_three_way(repo, tree, patch, known)?;
    let after = applied.tree(tree);
    let carried = match applied {
        Applied::AlreadyThere => Carried::AlreadyThere,
        Applied::AsWritten(_) if check_index_lines(repo, tree, after, patch).is_ok() => {
            Carried::Unchanged
        }
        _ => Carried::Rewritten(email_of(repo, tree, after, &patch.message()?)?),
    };
    Ok((after, carried))
}

/// `patches` applied as written from `tree`, in `repo`: every blob the series gives, before and
/// after each patch, which `apply_three_way` merges from.
pub fn blobs(repo: &Repository, tree: Oid, patches: &[Patch]) -> Result<Vec<Oid>> {
    let (mut tree, mut blobs) = (tree, Vec::new());
    for patch in patches {
        let after = apply(repo, tree, patch)?;
        for change in merge::changes(repo, tree, after)? {
            blobs.extend(change.before.into_iter().chain(change.after));
        }
        tree = after;
    }
    Ok(blobs)
}

/// How a patch went onto a tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Its context matched: the new tree.
    AsWritten(Oid),
    /// Merged three ways, its context having moved: the new tree.
    ThreeWay(Oid),
    /// The tree holds its change already.
    AlreadyThere,
}

impl Applied {
    /// The tree after the patch, `tree` when it held the change already.
    pub fn tree(self, tree: Oid) -> Oid {
        match self {
            Applied::AsWritten(after) | Applied::ThreeWay(after) => after,
            Applied::AlreadyThere => tree,
        }
    }
}

/// The `git format-patch` mail of the change from the tree `before` to the tree `after`, with
/// `message` and its author.
pub fn email_of(repo: &Repository, before: Oid, after: Oid, message: &Message) -> Result<Vec<u8>> {
    let time = git2::Time::new(message.time.0, message.time.1);
    let author = git2::Signature::new(&message.author_name, &message.author_email, &time)?;
    let [before, after] = [before, after].map(|id| repo.find_tree(id));
    let parent = repo.commit(None, &author, &author, "before", &before?, &[])?;
    let parent = repo.find_commit(parent)?;
    let id = repo.commit(None, &author, &author, &message.text(), &after?, &[&parent])?;
    email(&repo.find_commit(id)?)
}

/// `git format-patch`'s file name for patch `number` (git's default `--filename-max-length=64`).
pub fn file_name(number: usize, subject: &str) -> String {
    let title = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '_';
    let spaced = subject.replace(|c| !title(c), " ");
    let mut name = spaced.split_whitespace().collect::<Vec<_>>().join("-");
    while name.contains("..") {
        name = name.replace("..", ".");
    }
    let mut name = format!("{number:04}-{}", name.trim_end_matches(['.', '-']));
    name.truncate(64 - ".patch".len() - 1);
    name + ".patch"
}

/// `commit` as a `git format-patch` mail, without libgit2's version signature (it would change).
pub fn email(commit: &git2::Commit<'_>) -> Result<Vec<u8>> {
    let email = git2::Email::from_commit(commit, &mut git2::EmailCreateOptions::new())?;
    let text = String::from_utf8(email.as_slice().to_vec());
    let mut text = text.context("the commit is not UTF-8")?;
    if let Some(at) = text.rfind("\n--\nlibgit2 ") {
        text.truncate(at + 1);
    }
    // As `git format-patch --zero-commit` writes it: the commit's id would change the file on
    // every round trip through a clone, though nothing in the patch changed.
    if let Some(rest) = text.strip_prefix("From ").and_then(|t| t.get(40..)) {
        text = format!("From {}{rest}", "0".repeat(40));
    }
    // libgit2 writes a negative offset that is not whole hours as `-03-30` (`%+03d%02d` of -3
    // and -30), which no mail reader takes; git writes `-0330`.
    let offset = commit.author().when().offset_minutes();
    let wrong = format!("{:+03}{:02}\n", offset / 60, offset % 60);
    let right = format!("{:+05}\n", offset / 60 * 100 + offset % 60);
    if let Some((head, date)) = text.split_once("\nDate: ") {
        text = format!("{head}\nDate: {}", date.replacen(&wrong, &right, 1));
    }
    Ok(text.into_bytes())
}
