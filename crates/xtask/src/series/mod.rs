//! The patch series in `patches/`: `git format-patch` files, applied in file-name order.

mod mail;

pub use mail::{parse_message, Message};

use std::cell::RefCell;
use std::path::Path;

use anyhow::{bail, Context, Result};
use git2::{ApplyOptions, Diff, Oid, Repository};

/// One `NNNN-<subject>.patch` file.
#[derive(Clone, Debug)]
pub struct Patch {
    pub file_name: String,
    pub bytes: Vec<u8>,
}

/// The patches in `dir`, in apply order. Other files (the pin) are left alone; a patch file
/// whose name does not start with a four-digit number, or a number used twice, is an error.
pub fn load(dir: &Path) -> Result<Vec<Patch>> {
    let mut patches = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if !file_name.ends_with(".patch") {
            continue;
        }
        if !numbered(&file_name) {
            bail!("{file_name}: a patch's name must start with its four-digit number, as `0001-`");
        }
        let bytes = std::fs::read(entry.path())?;
        patches.push(Patch { file_name, bytes });
    }
    patches.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    for pair in patches.windows(2) {
        if pair[0].number() == pair[1].number() {
            bail!(
                "{} and {} share a number",
                pair[0].file_name,
                pair[1].file_name
            );
        }
    }
    Ok(patches)
}

/// Whether a patch file's name starts with its four-digit number and a `-`, which
/// `Patch::number` relies on.
fn numbered(file_name: &str) -> bool {
    let name = file_name.as_bytes();
    name.get(4) == Some(&b'-') && name[..4].iter().all(u8::is_ascii_digit)
}

impl Patch {
    /// The patch's number, as in `0001` (`load` checks that the name starts with one).
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
}

/// Applies `patch` to `tree` in `repo`. When a hunk does not apply, the error names the patch,
/// the file and the hunk, and shows the lines it expected beside the ones the file has.
pub fn apply(repo: &Repository, tree: Oid, patch: &Patch) -> Result<Oid> {
    let diff = patch.diff()?;
    let base = repo.find_tree(tree)?;
    // Which file and hunk libgit2 was at, from its callbacks, to say what failed.
    let position: RefCell<(Option<String>, usize, Option<String>)> = RefCell::new((None, 0, None));
    let applied = {
        let mut options = ApplyOptions::new();
        options.delta_callback(|delta| {
            let path = delta.and_then(|d| d.old_file().path().or(d.new_file().path()));
            *position.borrow_mut() = (path.map(|p| p.display().to_string()), 0, None);
            true
        });
        options.hunk_callback(|hunk| {
            let mut position = position.borrow_mut();
            position.1 += 1;
            position.2 = hunk.map(|h| String::from_utf8_lossy(h.header()).trim_end().to_string());
            true
        });
        repo.apply_to_tree(&base, &diff, Some(&mut options))
    };
    match applied {
        Ok(mut index) => Ok(index.write_tree_to(repo)?),
        Err(err) => {
            let (file, hunk_number, hunk) = position.into_inner();
            let detail = match (&file, &hunk) {
                (Some(file), Some(header)) => {
                    explain_hunk(repo, &base, &diff, file, hunk_number, header).unwrap_or_else(
                        |_| format!("{file}: hunk {hunk_number} ({header}) does not apply"),
                    )
                }
                (Some(file), None) if base.get_path(Path::new(file)).is_err() => {
                    format!("{file} does not exist")
                }
                (Some(file), None) => format!("{file}: {}", err.message()),
                _ => err.message().to_string(),
            };
            bail!("{} does not apply: {detail}", patch.file_name)
        }
    }
}

/// "file: hunk N (@@ ... @@) expected these lines at line L: ... found: ...".
fn explain_hunk(
    repo: &Repository,
    base: &git2::Tree<'_>,
    diff: &Diff<'_>,
    file: &str,
    hunk_number: usize,
    header: &str,
) -> Result<String> {
    let delta_index = diff
        .deltas()
        .position(|d| d.old_file().path().or(d.new_file().path()) == Some(Path::new(file)))
        .context("no such file in the patch")?;
    let patch = git2::Patch::from_diff(diff, delta_index)?.context("no patch for the file")?;
    let (hunk, line_count) = patch.hunk(hunk_number - 1)?;
    let show = |line: &str| format!("\n    | {line}");
    let mut expected = Vec::new();
    for line in 0..line_count {
        let line = patch.line_in_hunk(hunk_number - 1, line)?;
        if matches!(line.origin(), ' ' | '-') {
            let line = String::from_utf8_lossy(line.content());
            expected.push(show(line.trim_end_matches('\n')));
        }
    }
    let blob = repo.find_blob(base.get_path(Path::new(file))?.id())?;
    let text = String::from_utf8_lossy(blob.content());
    let start = hunk.old_start().max(1) as usize - 1;
    let found = text.lines().skip(start).take(expected.len()).map(show);
    Ok(format!(
        "{file}: hunk {hunk_number} ({header}) expected, from line {}:{}\nbut the file has:{}",
        start + 1,
        expected.concat(),
        found.collect::<String>()
    ))
}

/// `git format-patch`'s file name for patch `number` with `subject`: the subject's letters,
/// digits, `.` and `_`, other runs turned into one `-`, cut so that the name (without
/// `.patch`) stays within 57 characters, as git's default `--filename-max-length=64` does.
pub fn file_name(number: usize, subject: &str) -> String {
    let mut name = format!("{number:04}-");
    let start = name.len();
    let mut blank = false;
    let mut chars = subject.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            if blank && name.len() > start {
                name.push('-');
            }
            blank = false;
            name.push(c);
            if c == '.' {
                while chars.peek() == Some(&'.') {
                    chars.next();
                }
            }
        } else {
            blank = true;
        }
    }
    while name.len() > start && name.ends_with(['.', '-']) {
        name.pop();
    }
    name.truncate(64 - ".patch".len() - 1);
    name + ".patch"
}

/// `commit` as a `git format-patch` mail (`[PATCH]`, with a diffstat), without libgit2's
/// version signature, so that the file does not change with the library.
pub fn email(commit: &git2::Commit<'_>) -> Result<Vec<u8>> {
    let email = git2::Email::from_commit(commit, &mut git2::EmailCreateOptions::new())?;
    let mut bytes = email.as_slice().to_vec();
    let tail = b"\n--\nlibgit2 ";
    if let Some(at) = bytes.windows(tail.len()).rposition(|w| w == tail) {
        bytes.truncate(at + 1);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_name_follows_git_format_patch() {
        assert_eq!(
            file_name(1, "generation: Sample greedily at temperature 0"),
            "0001-generation-Sample-greedily-at-temperature-0.patch"
        );
        // Names that git 2.47 `format-patch` gave these subjects.
        assert_eq!(
            file_name(
                1,
                "Treat a zero temperature as greedy in LogitsProcessor::from_sampling"
            ),
            "0001-Treat-a-zero-temperature-as-greedy-in-LogitsProcesso.patch"
        );
        assert_eq!(file_name(2, "..Fix...it.."), "0002-.Fix.it.patch");
    }

    #[test]
    fn load_refuses_unnumbered_and_duplicate_patches() -> Result<()> {
        let temp = tempfile::tempdir()?;
        std::fs::write(temp.path().join("upstream.toml"), "")?;
        std::fs::write(temp.path().join("0002-b.patch"), "")?;
        std::fs::write(temp.path().join("0001-a.patch"), "")?;
        let names: Vec<String> = load(temp.path())?
            .into_iter()
            .map(|p| p.file_name)
            .collect();
        assert_eq!(names, ["0001-a.patch", "0002-b.patch"]);
        std::fs::write(temp.path().join("0001-again.patch"), "")?;
        let err = load(temp.path()).unwrap_err().to_string();
        assert_eq!(err, "0001-a.patch and 0001-again.patch share a number");
        std::fs::remove_file(temp.path().join("0001-again.patch"))?;
        std::fs::write(temp.path().join("fix.patch"), "")?;
        let err = load(temp.path()).unwrap_err().to_string();
        assert!(
            err.starts_with("fix.patch: a patch's name must start"),
            "{err}"
        );
        Ok(())
    }
}
