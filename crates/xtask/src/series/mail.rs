//! A `git format-patch` file's mail headers and message, as `git am` reads them: folded headers,
//! RFC 2047 encoded words, and the RFC 2822 date with its offset.

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
    // A line that starts with a blank continues the header before it.
    let (headers, message) = text.split_once("\n\n").unwrap_or((text, ""));
    let headers = headers.replace("\n ", " ").replace("\n\t", "\t");
    let not_header = |l: &&str| !l.contains(':') || l.starts_with([' ', '\t']);
    if let Some(line) = headers.lines().find(not_header) {
        bail!("`{line}` is not a mail header: is this a `git format-patch` file?");
    }
    let header = |name: &str| -> Result<String> {
        let mut headers = headers.lines().filter_map(|line| line.split_once(':'));
        let found = headers.find(|(n, _)| n.eq_ignore_ascii_case(name));
        let (_, value) = found.with_context(|| format!("no `{name}:` header"))?;
        decode_words(value.trim())
    };
    let from = header("from")?;
    let address = from.rfind('<').zip(from.rfind('>'));
    let Some((open, close)) = address.filter(|(open, close)| open < close) else {
        bail!("`From: {from}` has no <address>");
    };
    let email = &from[open + 1..close];
    let name = from[..open].trim();
    let quoted = name.strip_prefix('"').and_then(|n| n.strip_suffix('"'));
    let name = quoted.unwrap_or(name);
    let date = header("date")?;
    let time =
        parse_date(&date).with_context(|| format!("`Date: {date}` is not an RFC 2822 date"))?;
    // `[PATCH]`, `[PATCH 2/3]` and the like, as `git am` drops them.
    let subject = header("subject")?;
    let mut subject = subject.trim();
    while let Some((_, rest)) = subject.strip_prefix('[').and_then(|s| s.split_once(']')) {
        subject = rest.trim_start();
    }
    // The message ends at format-patch's `---` separator or at the diff.
    let body: Vec<&str> = message
        .lines()
        .take_while(|line| *line != "---" && !line.starts_with("diff --git "))
        .map(str::trim_end)
        .collect();
    Ok(Message {
        author_name: name.replace("\\\"", "\""),
        author_email: email.to_string(),
        time,
        subject: subject.to_string(),
        body: body.join("\n").trim_matches('\n').to_string(),
    })
}

/// Decodes format-patch's RFC 2047 words (`=?UTF-8?q?...?=`), dropping the blanks between two.
fn decode_words(value: &str) -> Result<String> {
    let mut out = String::new();
    let mut last_was_word = false;
    let mut rest = value;
    // Each step takes a run of blanks, then a token.
    while !rest.is_empty() {
        let token = rest.trim_start_matches([' ', '\t']);
        let blank = &rest[..rest.len() - token.len()];
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
    let &[charset, encoding, data] = &inner.splitn(3, '?').collect::<Vec<_>>()[..] else {
        return Ok(None);
    };
    if !charset.eq_ignore_ascii_case("utf-8") && !charset.eq_ignore_ascii_case("us-ascii") {
        bail!("`{token}`: only UTF-8 encoded words are read");
    }
    if !encoding.eq_ignore_ascii_case("q") {
        bail!("`{token}`: only Q-encoded words are read, as git writes them");
    }
    // `=XX` is the byte XX in hex; `_` is a space.
    let data = data.replace('_', " ");
    let mut pieces = data.split('=');
    let mut bytes = Vec::from(pieces.next().unwrap_or_default());
    for piece in pieces {
        let byte = piece.get(..2).and_then(|h| u8::from_str_radix(h, 16).ok());
        bytes.push(byte.with_context(|| format!("`{token}`: bad `=XX` escape"))?);
        bytes.extend(piece[2..].bytes());
    }
    let text = String::from_utf8(bytes).with_context(|| format!("`{token}` is not UTF-8"))?;
    Ok(Some(text))
}

/// An RFC 2822 date, as in `Sun, 29 Nov 2026 21:31:28 +0000`: seconds since the epoch, offset.
fn parse_date(value: &str) -> Option<(i64, i32)> {
    let value = value.split_once(',').map_or(value, |(_, rest)| rest);
    let &[day, month, year, time, zone] = &value.split_whitespace().collect::<Vec<_>>()[..] else {
        return None;
    };
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = months.iter().position(|m| *m == month)? as i64 + 1;
    let time: Option<Vec<i64>> = time.split(':').map(|p| p.parse().ok()).collect();
    let &[hours, minutes, seconds] = &time?[..] else {
        return None;
    };
    // `+hhmm` or `-hhmm`, as a number whose sign both parts share.
    if zone.len() != 5 || !zone.starts_with(['+', '-']) {
        return None;
    }
    let zone: i32 = zone.parse().ok()?;
    let offset = zone / 100 * 60 + zone % 100;
    let days = crate::date::days_from_civil(year.parse().ok()?, month, day.parse().ok()?);
    let local = days * 86_400 + hours * 3600 + minutes * 60 + seconds;
    Some((local - i64::from(offset) * 60, offset))
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
    fn parse_message_reads_tab_folded_words_and_text_after_the_address() -> Result<()> {
        let mail = "From: =?UTF-8?q?Zo=C3=AB?=\n\t=?UTF-8?q?_Example?= <zoe@example.com> (Zoe)\n\
                    Date: Thu, 1 Jan 1970 00:00:00 +0000\nSubject: [PATCH] a\tb  c\n\nBody.\n";
        let message = parse_message(mail.as_bytes())?;
        assert_eq!(message.author_name, "Zoë Example");
        assert_eq!(message.author_email, "zoe@example.com");
        assert_eq!(message.subject, "a\tb  c");
        Ok(())
    }

    #[test]
    fn parse_date_matches_known_instants() {
        assert_eq!(parse_date("Thu, 1 Jan 1970 00:00:00 +0000"), Some((0, 0)));
        assert_eq!(
            parse_date("Sat, 29 Feb 2020 12:00:00 +0200"),
            Some((1_582_970_400, 120))
        );
        assert!(parse_date("yesterday").is_none());
        assert!(parse_date("Thu, 1 Jan 1970 00:00:00 0000").is_none());
    }
}
