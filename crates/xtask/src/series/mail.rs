//! A `git format-patch` file's mail headers and message, as `git am` reads them: folded headers,
//! RFC 2047 encoded words, and the RFC 2822 date with its offset.

use anyhow::{bail, Context, Result};
use mailparse::MailHeaderMap;

/// The commit a patch describes, as `git am` reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// The message of `commit`, with its author.
    pub fn of(commit: &git2::Commit<'_>) -> Result<Message> {
        let author = commit.author();
        Ok(Message {
            author_name: author.name().unwrap_or_default().to_string(),
            author_email: author.email().unwrap_or_default().to_string(),
            time: (author.when().seconds(), author.when().offset_minutes()),
            subject: crate::git::subject(commit)?,
            body: commit.body()?.unwrap_or_default().trim_matches('\n').into(),
        })
    }

    /// `name` and `email` as the author, at the time the patch records.
    pub fn signature(&self, name: &str, email: &str) -> Result<git2::Signature<'static>> {
        let time = git2::Time::new(self.time.0, self.time.1);
        Ok(git2::Signature::new(name, email, &time)?)
    }

    /// The whole commit message.
    pub fn text(&self) -> String {
        match self.body.as_str() {
            "" => format!("{}\n", self.subject),
            body => format!("{}\n\n{body}\n", self.subject),
        }
    }
}

/// Reads the mail headers and the message of a `git format-patch` file.
pub fn parse_message(bytes: &[u8]) -> Result<Message> {
    let text = std::str::from_utf8(bytes).context("the patch is not UTF-8")?;
    let mbox_line = text.strip_prefix("From ").and_then(|t| t.split_once('\n'));
    let text = mbox_line.map_or(text, |(_, rest)| rest);
    let (headers, body_start) = mailparse::parse_headers(text.as_bytes())
        .context("unreadable mail headers: is this a `git format-patch` file?")?;
    // mailparse reads a line without `:` as a header named after the whole line; a line that
    // starts with a blank continues the header before it.
    let not_header = |l: &&str| !l.is_empty() && !l.starts_with([' ', '\t']) && !l.contains(':');
    if let Some(line) = text[..body_start].lines().find(not_header) {
        bail!("`{line}` is not a mail header: is this a `git format-patch` file?");
    }
    let header = |name: &str| {
        let found = headers.get_first_header(name);
        found.with_context(|| format!("no `{name}:` header"))
    };
    // By hand, as `git am` reads it: libgit2 writes the name unquoted, commas and all.
    let from = header("from")?.get_value();
    let address = from.rfind('<').zip(from.rfind('>'));
    let Some((open, close)) = address.filter(|(open, close)| open < close) else {
        bail!("`From: {}` has no <address>", from.trim());
    };
    let name = from[..open].trim();
    let quoted = name.strip_prefix('"').and_then(|n| n.strip_suffix('"'));
    let name = quoted.unwrap_or(name).replace("\\\"", "\"");
    let date = header("date")?.get_value();
    let date = date.trim();
    // Day, month, year, `hh:mm:ss` and `+hhmm` or `-hhmm` (a number whose sign both parts
    // share): mailparse alone also reads a date cut short.
    let rest = date.split_once(',').map_or(date, |(_, rest)| rest);
    let zone = match rest.split_whitespace().collect::<Vec<_>>()[..] {
        [_, _, _, time, zone] if time.split(':').map(str::len).eq([2, 2, 2]) => zone,
        _ => "",
    };
    let signed = zone.len() == 5 && zone.starts_with(['+', '-']);
    let zone = zone.parse::<i32>().ok().filter(|_| signed);
    let offset = zone.map(|z| z / 100 * 60 + z % 100);
    let time = mailparse::dateparse(date).ok().zip(offset);
    let time = time.with_context(|| format!("`Date: {date}` is not an RFC 2822 date"))?;
    // `[PATCH]`, `[PATCH 2/3]` and the like, as `git am` drops them.
    let subject = header("subject")?.get_value();
    let mut subject = subject.trim();
    while let Some((_, rest)) = subject.strip_prefix('[').and_then(|s| s.split_once(']')) {
        subject = rest.trim_start();
    }
    // The message ends at format-patch's `---` separator or at the diff.
    let in_message = |line: &&str| *line != "---" && !line.starts_with("diff --git ");
    let lines = text[body_start..].lines().take_while(in_message);
    let body: Vec<&str> = lines.map(str::trim_end).collect();
    Ok(Message {
        author_name: name,
        author_email: from[open + 1..close].to_string(),
        time,
        subject: subject.to_string(),
        body: body.join("\n").trim_matches('\n').to_string(),
    })
}
