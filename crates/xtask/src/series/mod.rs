//! The `git format-patch` files in `patches/`, in apply order, read as `git am` reads them.

mod mail;
pub mod notes;
pub mod resolutions;
pub mod stack_file;

pub use mail::{parse_message, Message};

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use fs_err as fs;
use git2::{Diff, Oid, Repository};

use crate::series::resolutions::Resolutions;
use notes::Notes;
use stack_file::StackFile;

/// One `NNNN-<subject>.patch` file, with its message as `git am` reads it.
#[derive(Clone, Debug)]
pub struct Patch {
    pub file_name: String,
    pub bytes: Vec<u8>,
    pub message: Message,
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
        let resolutions = crate::series::resolutions::load(dir, &stack, &patches)?;
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
    pub fn notes_of(&self, patch: &Patch) -> &Notes {
        static NONE: Notes = Notes {
            preamble: Vec::new(),
            sections: Vec::new(),
            test_plan: Vec::new(),
        };
        self.notes.get(&patch.file_name).unwrap_or(&NONE)
    }
}

/// The `.patch` files in `dir`, in apply order, each named after a number of its own.
fn load_patches(dir: &Path) -> Result<Vec<Patch>> {
    let names = crate::fsutil::names(dir)?;
    let names: Vec<String> = names
        .into_iter()
        .filter(|n| n.ends_with(".patch"))
        .collect();
    for name in &names {
        // `Patch::number` relies on this.
        let bytes = name.as_bytes();
        if bytes.get(4) != Some(&b'-') || !bytes[..4].iter().all(u8::is_ascii_digit) {
            bail!("{name}: a patch's name must start with its four-digit number, as `0001-`");
        }
    }
    if let Some([a, b]) = names.windows(2).find(|n| n[0][..4] == n[1][..4]) {
        bail!("{a} and {b} share a number");
    }
    let read = |name: String| Patch::new(name.clone(), fs::read(dir.join(&name))?);
    names.into_iter().map(read).collect()
}

impl Patch {
    /// The patch `file_name` holds, its message read.
    pub fn new(file_name: String, bytes: Vec<u8>) -> Result<Patch> {
        let message = parse_message(&bytes).with_context(|| format!("in {file_name}"))?;
        Ok(Patch {
            file_name,
            bytes,
            message,
        })
    }

    /// The patch's number, as in `0001`.
    pub fn number(&self) -> &str {
        &self.file_name[..4]
    }

    pub fn diff(&self) -> Result<Diff<'static>> {
        Diff::from_buffer(&self.bytes)
            .with_context(|| format!("{}: git cannot read the patch in it", self.file_name))
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

/// One `index <before>..<after>` line of a patch: the blobs, abbreviated, that the file named
/// by the `diff --git` line above it has before and after the patch (zeros: no file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexLine {
    pub path: String,
    pub before: String,
    pub after: String,
}

/// The first `index` line of `patch` that names other blobs than its file has in `before` and
/// `after`, the trees just before and after it, said as `check` fails with; `None` where every
/// line names them.
pub fn index_line_differs(
    repo: &Repository,
    before: Oid,
    after: Oid,
    patch: &Patch,
) -> Result<Option<String>> {
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
                return Ok(Some(format!(
                    "{}: its index line names {named} as {} {side} it, but the series gives {}: \
                     write it back (`cargo xtask pr --candle <clone>`, then `cargo xtask \
                     format-patch --candle <clone> --branch <its branch>`), which writes the \
                     blobs the series gives",
                    patch.file_name,
                    line.path,
                    &real[..named.len().clamp(7, 40)],
                )));
            }
        }
    }
    Ok(None)
}

/// The `git format-patch` mail of the change from the tree `before` to the tree `after`, with
/// `message` and its author.
pub fn email_of(repo: &Repository, before: Oid, after: Oid, message: &Message) -> Result<Vec<u8>> {
    let author = message.signature(&message.author_name, &message.author_email)?;
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
