//! A proposed pull request is the size of its bug: each one's library lines, counted as `git diff
//! --numstat` counts them (added plus removed, tests left out), and its notes, on every base,
//! stay within what a reviewer reads at once.

use std::path::{Path, PathBuf};

use anyhow::Result;

fn patches_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../patches")
}

/// The most library lines each proposed patch may change.
const LIBRARY_LINES: [(&str, usize); 4] = [("0001", 35), ("0003", 35), ("0004", 30), ("0013", 15)];

/// The most lines a pull request's notes may have, on `main` or on another base.
const NOTES_LINES: usize = 20;

/// Lines added or removed in files outside a `tests/` folder.
fn library_lines(patch: &[u8]) -> usize {
    let text = String::from_utf8_lossy(patch);
    let mut in_library = false;
    let mut count = 0;
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("diff --git a/") {
            in_library = !path.contains("/tests/");
        } else if line.starts_with("+++ ") || line.starts_with("--- ") {
            continue;
        } else if in_library && (line.starts_with('+') || line.starts_with('-')) {
            count += 1;
        }
    }
    count
}

#[test]
fn every_proposed_patch_and_its_resolutions_keep_their_budget() -> Result<()> {
    let dir = patches_dir();
    let stack = xtask::series::Series::load(&dir)?.stack;
    let all = xtask::series::Series::load(&dir)?.patches;
    let (proposed, _) = stack.split_carried(all.clone());
    let numbers: Vec<&str> = proposed.iter().map(|p| p.number()).collect();
    let budgeted: Vec<&str> = LIBRARY_LINES.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, budgeted, "every proposed patch has a budget");
    let folders = std::iter::once(dir.clone()).chain(
        stack
            .rewrites
            .keys()
            .map(|name| xtask::series::resolutions::dir(&dir, name)),
    );
    for folder in folders {
        for (number, budget) in LIBRARY_LINES {
            let patch = all
                .iter()
                .find(|p| p.number() == number)
                .expect("a proposed patch");
            let path = folder.join(&patch.file_name);
            if let Ok(bytes) = std::fs::read(&path) {
                let lines = library_lines(&bytes);
                assert!(
                    lines <= budget,
                    "{}: {lines} library lines, over {budget}",
                    path.display()
                );
            }
            let notes = folder.join(xtask::series::notes::file_name(&patch.file_name));
            if let Ok(text) = std::fs::read_to_string(&notes) {
                let lines = text.lines().count();
                assert!(
                    lines <= NOTES_LINES,
                    "{}: {lines} lines, over {NOTES_LINES}",
                    notes.display()
                );
            }
        }
    }
    Ok(())
}

#[test]
fn library_lines_leave_out_tests_and_headers() {
    let patch = b"diff --git a/x/src/a.rs b/x/src/a.rs\n--- a/x/src/a.rs\n+++ b/x/src/a.rs\n@@ -1 +1 @@\n-a\n+b\n c\ndiff --git a/x/tests/t.rs b/x/tests/t.rs\n--- a/x/tests/t.rs\n+++ b/x/tests/t.rs\n@@ -1 +1,2 @@\n+t\n";
    assert_eq!(library_lines(patch), 2);
}

/// The most lines a source file of this crate may have: a reader takes one in whole.
const FILE_LINES: usize = 400;

#[test]
fn every_source_file_of_xtask_is_short_enough_to_read_whole() -> Result<()> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let pattern = format!("{}/**/*.rs", glob::Pattern::escape(&src.to_string_lossy()));
    let mut files = 0;
    for path in glob::glob(&pattern)? {
        let path = path?;
        let lines = std::fs::read_to_string(&path)?.lines().count();
        assert!(lines <= FILE_LINES, "{}: {lines} lines", path.display());
        files += 1;
    }
    assert!(files > 40, "only {files} files under {}", src.display());
    Ok(())
}
