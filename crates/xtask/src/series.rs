//! The patch series in `patches/`: `git format-patch` files, applied in file-name order.

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
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let entry = entry?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if !file_name.ends_with(".patch") {
            continue;
        }
        if number(&file_name).is_none() {
            bail!("{file_name}: a patch's name must start with its four-digit number, as `0001-`");
        }
        let bytes = std::fs::read(entry.path())?;
        patches.push(Patch { file_name, bytes });
    }
    patches.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    for pair in patches.windows(2) {
        if number(&pair[0].file_name) == number(&pair[1].file_name) {
            bail!(
                "{} and {} share a number",
                pair[0].file_name,
                pair[1].file_name
            );
        }
    }
    Ok(patches)
}

fn number(file_name: &str) -> Option<u32> {
    let digits = file_name.get(..4)?;
    if file_name.as_bytes().get(4) != Some(&b'-') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The commit a patch describes, as `git am` reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub author_name: String,
    pub author_email: String,
    /// Seconds since the epoch, and the offset east of UTC in minutes.
    pub time: (i64, i32),
    pub subject: String,
    /// The message after the subject line, without the blank line between them.
    pub body: String,
}

impl Message {
    /// The whole commit message.
    pub fn text(&self) -> String {
        if self.body.is_empty() {
            format!("{}\n", self.subject)
        } else {
            format!("{}\n\n{}\n", self.subject, self.body)
        }
    }

    pub fn signature(&self) -> Result<git2::Signature<'static>> {
        let time = git2::Time::new(self.time.0, self.time.1);
        Ok(git2::Signature::new(
            &self.author_name,
            &self.author_email,
            &time,
        )?)
    }
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

/// Reads the mail headers and the message of a `git format-patch` file.
pub fn parse_message(bytes: &[u8]) -> Result<Message> {
    let text = std::str::from_utf8(bytes).context("the patch is not UTF-8")?;
    let mut lines = text.lines().peekable();
    if lines.peek().is_some_and(|line| line.starts_with("From ")) {
        lines.next();
    }
    // Headers end at the first blank line; a line that starts with a space continues the one
    // before it.
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in lines.by_ref() {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            let Some(last) = headers.last_mut() else {
                bail!("the first header line is a continuation line");
            };
            last.1.push_str(line);
        } else {
            let Some((name, value)) = line.split_once(':') else {
                bail!("`{line}` is not a mail header: is this a `git format-patch` file?");
            };
            headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let header = |name: &str| -> Result<String> {
        let value = headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str());
        let value = value.with_context(|| format!("no `{name}:` header"))?;
        decode_words(value)
    };
    let (author_name, author_email) = parse_address(&header("from")?)?;
    let time = parse_date(&header("date")?)?;
    let subject = strip_subject_prefix(&header("subject")?);
    // The message ends where format-patch's `---` separator or the diff begins.
    let mut body = Vec::new();
    for line in lines {
        if line == "---" || line.starts_with("diff --git ") {
            break;
        }
        body.push(line);
    }
    while body.last().is_some_and(|line| line.trim().is_empty()) {
        body.pop();
    }
    while body.first().is_some_and(|line| line.trim().is_empty()) {
        body.remove(0);
    }
    let body = body
        .iter()
        .map(|line| line.trim_end())
        .collect::<Vec<_>>()
        .join("\n");
    Ok(Message {
        author_name,
        author_email,
        time,
        subject,
        body,
    })
}

/// `Name <email>`, the name possibly quoted.
fn parse_address(value: &str) -> Result<(String, String)> {
    let (Some(open), Some(close)) = (value.rfind('<'), value.rfind('>')) else {
        bail!("`From: {value}` has no <address>");
    };
    if close < open {
        bail!("`From: {value}` has no <address>");
    }
    let name = value[..open].trim();
    let name = name
        .strip_prefix('"')
        .and_then(|n| n.strip_suffix('"'))
        .unwrap_or(name);
    Ok((
        name.replace("\\\"", "\""),
        value[open + 1..close].to_string(),
    ))
}

/// `[PATCH]`, `[PATCH 2/3]` and the like, as `git am` drops them.
fn strip_subject_prefix(subject: &str) -> String {
    let mut subject = subject.trim();
    while let Some(rest) = subject.strip_prefix('[') {
        match rest.find(']') {
            Some(end) => subject = rest[end + 1..].trim_start(),
            None => break,
        }
    }
    subject.to_string()
}

/// Decodes RFC 2047 words (`=?UTF-8?q?...?=`), which format-patch writes for names and subjects
/// that are not ASCII. Blanks between two encoded words are dropped, as the RFC says.
fn decode_words(value: &str) -> Result<String> {
    let mut out = String::new();
    let mut pending_blank = String::new();
    let mut last_was_word = false;
    let mut rest = value;
    while !rest.is_empty() {
        let blank_len = rest.len() - rest.trim_start().len();
        if blank_len > 0 {
            pending_blank.push_str(&rest[..blank_len]);
            rest = &rest[blank_len..];
            continue;
        }
        let token_len = rest.find([' ', '\t']).unwrap_or(rest.len());
        let token = &rest[..token_len];
        rest = &rest[token_len..];
        match decode_word(token)? {
            Some(decoded) => {
                if !last_was_word {
                    out.push_str(&pending_blank);
                }
                out.push_str(&decoded);
                last_was_word = true;
            }
            None => {
                out.push_str(&pending_blank);
                out.push_str(token);
                last_was_word = false;
            }
        }
        pending_blank.clear();
    }
    Ok(out)
}

fn decode_word(token: &str) -> Result<Option<String>> {
    let Some(inner) = token.strip_prefix("=?").and_then(|t| t.strip_suffix("?=")) else {
        return Ok(None);
    };
    let mut parts = inner.splitn(3, '?');
    let (Some(charset), Some(encoding), Some(data)) = (parts.next(), parts.next(), parts.next())
    else {
        return Ok(None);
    };
    if !charset.eq_ignore_ascii_case("utf-8") && !charset.eq_ignore_ascii_case("us-ascii") {
        bail!("`{token}`: only UTF-8 encoded words are read");
    }
    if !encoding.eq_ignore_ascii_case("q") {
        bail!("`{token}`: only Q-encoded words are read, as git writes them");
    }
    let mut bytes = Vec::new();
    let mut input = data.bytes();
    while let Some(b) = input.next() {
        match b {
            b'_' => bytes.push(b' '),
            b'=' => {
                let hex = [input.next(), input.next()];
                let hex: Option<Vec<u8>> = hex.into_iter().collect();
                let value = hex
                    .and_then(|h| u8::from_str_radix(std::str::from_utf8(&h).ok()?, 16).ok())
                    .with_context(|| format!("`{token}`: bad `=XX` escape"))?;
                bytes.push(value);
            }
            b => bytes.push(b),
        }
    }
    Ok(Some(
        String::from_utf8(bytes).with_context(|| format!("`{token}` is not UTF-8"))?,
    ))
}

/// An RFC 2822 date, as in `Date: Sun, 29 Nov 2026 21:31:28 +0000`.
fn parse_date(value: &str) -> Result<(i64, i32)> {
    let bad = || anyhow::anyhow!("`Date: {value}` is not an RFC 2822 date");
    let value = value.split_once(',').map_or(value, |(_, rest)| rest);
    let parts: Vec<&str> = value.split_whitespace().collect();
    let [day, month, year, time, zone] = parts[..] else {
        return Err(bad());
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month).ok_or_else(bad)? as i64 + 1;
    let day: i64 = day.parse().map_err(|_| bad())?;
    let year: i64 = year.parse().map_err(|_| bad())?;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_>>()?;
    let [hours, minutes, seconds] = hms[..] else {
        return Err(bad());
    };
    let (sign, digits) = match zone.split_at_checked(1) {
        Some(("+", digits)) => (1, digits),
        Some(("-", digits)) => (-1, digits),
        _ => return Err(bad()),
    };
    if digits.len() != 4 {
        return Err(bad());
    }
    let zone: i32 = digits.parse().map_err(|_| bad())?;
    let offset = sign * (zone / 100 * 60 + zone % 100);
    let local = crate::date::days_from_civil(year, month, day) * 86_400
        + hours * 3600
        + minutes * 60
        + seconds;
    Ok((local - i64::from(offset) * 60, offset))
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
            let path = delta.and_then(|d| {
                d.old_file()
                    .path()
                    .or(d.new_file().path())
                    .map(Path::to_path_buf)
            });
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
    let mut expected = Vec::new();
    for line in 0..line_count {
        let line = patch.line_in_hunk(hunk_number - 1, line)?;
        if matches!(line.origin(), ' ' | '-') {
            expected.push(
                String::from_utf8_lossy(line.content())
                    .trim_end_matches('\n')
                    .to_string(),
            );
        }
    }
    let blob = repo.find_blob(base.get_path(Path::new(file))?.id())?;
    let text = String::from_utf8_lossy(blob.content());
    let start = hunk.old_start().max(1) as usize - 1;
    let found: Vec<&str> = text.lines().skip(start).take(expected.len()).collect();
    let show =
        |lines: &[&str]| -> String { lines.iter().map(|l| format!("\n    | {l}")).collect() };
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    Ok(format!(
        "{file}: hunk {hunk_number} ({header}) expected, from line {}:{}\nbut the file has:{}",
        start + 1,
        show(&expected),
        show(&found)
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
    let mut options = git2::EmailCreateOptions::new();
    let email = git2::Email::from_commit(commit, &mut options)?;
    let mut bytes = email.as_slice().to_vec();
    if let Some(at) = find_last(&bytes, b"\n--\nlibgit2 ") {
        bytes.truncate(at + 1);
    }
    Ok(bytes)
}

/// `commits` as a patch series: each one's `git format-patch` file name (numbered from 1) and
/// mail.
pub fn emails(repo: &Repository, commits: &[Oid]) -> Result<Vec<(String, Vec<u8>)>> {
    commits
        .iter()
        .enumerate()
        .map(|(index, id)| {
            let commit = repo.find_commit(*id)?;
            let name = file_name(index + 1, commit.summary()?.unwrap_or_default());
            Ok((name, email(&commit)?))
        })
        .collect()
}

fn find_last(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIT_FORMAT_PATCH: &str =
        "From 89bad4e13f768e7aae2a61b47217b9badae889ed Mon Sep 17 00:00:00 2001
From: =?UTF-8?q?Zo=C3=AB=20Example?=
 <zoe@example.com>
Date: Sun, 29 Nov 2026 21:31:28 -0130
Subject: [PATCH 2/3] generation: Sample greedily at temperature 0 in a subject
 long enough to fold

First paragraph.

Second paragraph.
---
 a.rs | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/a.rs b/a.rs
";

    #[test]
    fn parse_message_reads_what_git_am_reads() -> Result<()> {
        let message = parse_message(GIT_FORMAT_PATCH.as_bytes())?;
        assert_eq!(message.author_name, "Zoë Example");
        assert_eq!(message.author_email, "zoe@example.com");
        assert_eq!(
            message.subject,
            "generation: Sample greedily at temperature 0 in a subject long enough to fold"
        );
        assert_eq!(message.body, "First paragraph.\n\nSecond paragraph.");
        // Python: datetime(2026, 11, 29, 21, 31, 28, tzinfo=UTC-01:30).timestamp()
        assert_eq!(message.time, (1_795_993_288, -90));
        Ok(())
    }

    #[test]
    fn parse_date_matches_known_instants() -> Result<()> {
        assert_eq!(parse_date("Thu, 1 Jan 1970 00:00:00 +0000")?, (0, 0));
        assert_eq!(
            parse_date("Sat, 29 Feb 2020 12:00:00 +0200")?,
            (1_582_970_400, 120)
        );
        assert!(parse_date("yesterday").is_err());
        Ok(())
    }

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
