//! A `git format-patch` file's mail headers and message, as `git am` reads them: folded
//! headers, RFC 2047 encoded words, and the RFC 2822 date with its offset (which the commit
//! keeps, so that `format-patch` writes the same `Date:` back).

use anyhow::{bail, Context, Result};

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
        let (_, value) = headers
            .iter()
            .find(|(n, _)| n == name)
            .with_context(|| format!("no `{name}:` header"))?;
        decode_words(value)
    };
    let (author_name, author_email) = parse_address(&header("from")?)?;
    let time = parse_date(&header("date")?)?;
    let subject = strip_subject_prefix(&header("subject")?);
    // The message ends where format-patch's `---` separator or the diff begins; blank lines
    // around it are dropped.
    let body: Vec<&str> = lines
        .take_while(|line| *line != "---" && !line.starts_with("diff --git "))
        .map(str::trim_end)
        .collect();
    Ok(Message {
        author_name,
        author_email,
        time,
        subject,
        body: body.join("\n").trim_matches('\n').to_string(),
    })
}

/// `Name <email>`, the name possibly quoted.
fn parse_address(value: &str) -> Result<(String, String)> {
    let address = value.rfind('<').zip(value.rfind('>'));
    let Some((open, close)) = address.filter(|(open, close)| open < close) else {
        bail!("`From: {value}` has no <address>");
    };
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
    let mut last_was_word = false;
    let mut rest = value;
    // Each step: a run of blanks (dropped at the end), then a token.
    while !rest.trim_start().is_empty() {
        let token_start = rest.len() - rest.trim_start().len();
        let (blank, token) = rest.split_at(token_start);
        let (token, after) = token.split_at(token.find([' ', '\t']).unwrap_or(token.len()));
        rest = after;
        let decoded = decode_word(token)?;
        if !(last_was_word && decoded.is_some()) {
            out.push_str(blank);
        }
        last_was_word = decoded.is_some();
        out.push_str(decoded.as_deref().unwrap_or(token));
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
                let hex = input.next().zip(input.next()).map(|(h, l)| [h, l]);
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
    // `+hhmm` or `-hhmm`, as a number whose sign both parts share.
    let zone: i32 = match zone.split_at_checked(1) {
        Some(("+" | "-", digits)) if digits.len() == 4 => zone.parse().map_err(|_| bad())?,
        _ => return Err(bad()),
    };
    let offset = zone / 100 * 60 + zone % 100;
    let local = crate::date::days_from_civil(year, month, day) * 86_400
        + hours * 3600
        + minutes * 60
        + seconds;
    Ok((local - i64::from(offset) * 60, offset))
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
}
