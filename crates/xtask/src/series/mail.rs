//! A `git format-patch` file's mail headers and message, as `git am` reads them: folded headers,
//! RFC 2047 encoded words, and the RFC 2822 date with its offset.

use anyhow::{bail, Context, Result};
use mailparse::MailHeaderMap;

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
        // libgit2's `Email` writes the name unquoted, as it is.
        let mail = mail.replace(
            "=?UTF-8?q?Zo=C3=AB?=\n\t=?UTF-8?q?_Example?=",
            "Doe, (J.) John",
        );
        assert_eq!(
            parse_message(mail.as_bytes())?.author_name,
            "Doe, (J.) John"
        );
        Ok(())
    }

    #[test]
    fn parse_message_reads_known_instants_and_rejects_other_dates() {
        let time = |date: &str| {
            let mail = format!("From: A <a@b.c>\nDate: {date}\nSubject: a\n\nBody.\n");
            parse_message(mail.as_bytes()).map(|message| message.time)
        };
        assert_eq!(time("Thu, 1 Jan 1970 00:00:00 +0000").unwrap(), (0, 0));
        assert_eq!(
            time("Sat, 29 Feb 2020 12:00:00 +0200").unwrap(),
            (1_582_970_400, 120)
        );
        assert_eq!(
            time("Sun, 29 Nov 2026 21:31:28 -0130").unwrap(),
            (1_795_993_288, -90)
        );
        let error = time("yesterday").unwrap_err().to_string();
        assert_eq!(error, "`Date: yesterday` is not an RFC 2822 date");
        assert!(time("Thu, 1 Jan 1970 00:00:00 0000").is_err());
        assert!(time("Thu, 1 Jan 2026 12 +0100").is_err());
        assert!(time("x +0001").is_err());
        assert!(time("Thu, 1 Jan 2026 12::00 +0100").is_err());
    }

    #[test]
    fn parse_message_refuses_what_is_not_mail_headers() {
        let error = |text: &str| parse_message(text.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            error("diff --git a/x b/x\n--- a/x\n"),
            "`diff --git a/x b/x` is not a mail header: is this a `git format-patch` file?"
        );
        assert_eq!(
            error("From: A <a@b.c>\ngarbage\nSubject: a\n\nBody.\n"),
            "`garbage` is not a mail header: is this a `git format-patch` file?"
        );
        assert!(error(" folded\nFrom: A <a@b.c>\n\n").starts_with("unreadable mail headers"));
    }
}
