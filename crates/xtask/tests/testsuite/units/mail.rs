//! The unit tests of `series`.

use anyhow::Result;
use xtask::series::*;

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
