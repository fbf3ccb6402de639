//! The README and `docs/` name only what exists: every `cargo xtask` command and its flags (from
//! the one declaration that parses them), every `cargo repro` and `bench-driver` flag (from their
//! `--help` snapshots, which their own tests keep current), every `ci/` script and `ci/all.sh`
//! step, and every `docs/` page linked.

use std::path::{Path, PathBuf};

use clap::CommandFactory;
use xtask::flags::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and every page of `docs/`, each with its name.
fn documents() -> Vec<(String, String)> {
    let root = root();
    let mut names = vec![PathBuf::from("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("a docs/ folder")
        .map(|entry| entry.expect("a readable docs/").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .map(|path| Path::new("docs").join(path.file_name().expect("a file name")))
        .collect();
    pages.sort();
    names.extend(pages);
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(root.join(&name)).expect("a readable document");
            (name.display().to_string(), text)
        })
        .collect()
}

/// The words that follow each `prefix` in `text`, up to where the command ends: the end of the
/// line, a closing backtick, a shell comment or operator, or a closing parenthesis.
fn invocations(text: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for line in text.lines() {
        let mut rest = line;
        while let Some(at) = rest.find(prefix) {
            rest = &rest[at + prefix.len()..];
            let end = rest
                .find(['`', '#', ';', '|', ')', ','])
                .unwrap_or(rest.len());
            let command = rest[..end].split("&&").next().unwrap_or_default();
            let words = command.split_whitespace().map(str::to_string).collect();
            found.push(words);
        }
    }
    found
}

/// The flag a word names, as in `--candle` from `--candle=../candle`; `None` for a word that is
/// no flag.
fn flag(word: &str) -> Option<&str> {
    let name = word.strip_prefix("--")?.split('=').next()?;
    let name = name.trim_end_matches(['.', ':', ']']);
    (!name.is_empty()).then_some(name)
}

#[test]
fn every_xtask_command_and_flag_named_exists() {
    let cli = Command::command();
    let mut checked = 0;
    let mut missing = Vec::new();
    for (name, text) in documents() {
        for words in invocations(&text, "cargo xtask ") {
            let Some(command) = words.first() else {
                continue;
            };
            // A placeholder in prose, as in `cargo xtask <command>`.
            if command.starts_with('<') {
                continue;
            }
            let Some(sub) = cli.find_subcommand(command) else {
                missing.push(format!("{name}: cargo xtask {command}"));
                continue;
            };
            checked += 1;
            for word in &words[1..] {
                let Some(flag) = flag(word.trim_start_matches('[')) else {
                    continue;
                };
                let known = sub.get_arguments().any(|a| a.get_long() == Some(flag));
                if !known && flag != "help" {
                    missing.push(format!("{name}: cargo xtask {command} --{flag}"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not there:\n{}",
        missing.join("\n")
    );
    // The README and docs/ name the tool's commands often: finding few means the scan broke.
    assert!(checked >= 20, "only {checked} `cargo xtask` commands found");
}

#[test]
fn every_repro_and_bench_driver_flag_named_exists() {
    let root = root();
    let helps = [
        ("cargo repro ", "crates/repro/tests/snapshots/help.txt"),
        ("bench-driver ", "benches/tests/snapshots/help.txt"),
    ];
    let mut checked = 0;
    let mut missing = Vec::new();
    for (prefix, snapshot) in helps {
        let help = std::fs::read_to_string(root.join(snapshot)).expect("a --help snapshot");
        for (name, text) in documents() {
            for words in invocations(&text, prefix) {
                for flag in words.iter().filter_map(|w| flag(w)) {
                    checked += 1;
                    if !help.contains(&format!("--{flag}")) {
                        missing.push(format!("{name}: {prefix}--{flag}"));
                    }
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not there:\n{}",
        missing.join("\n")
    );
    assert!(checked >= 3, "only {checked} flags found");
}

#[test]
fn every_ci_script_and_step_named_exists() {
    let root = root();
    let all = std::fs::read_to_string(root.join("ci/all.sh")).expect("ci/all.sh");
    let mut checked = 0;
    let mut missing = Vec::new();
    for (name, text) in documents() {
        for words in invocations(&text, "bash ci/") {
            let Some(script) = words.first() else {
                continue;
            };
            checked += 1;
            if !root.join("ci").join(script).is_file() {
                missing.push(format!("{name}: bash ci/{script}"));
            }
            if script == "all.sh" {
                for step in &words[1..] {
                    if !step.starts_with('<') && !all.contains(&format!("ci_{step}()")) {
                        missing.push(format!("{name}: bash ci/all.sh {step}"));
                    }
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not there:\n{}",
        missing.join("\n")
    );
    assert!(checked >= 3, "only {checked} `bash ci/` commands found");
}

#[test]
fn every_docs_page_linked_exists() {
    let root = root();
    let mut linked = 0;
    let mut missing = Vec::new();
    for (name, text) in documents() {
        for link in text.split("](").skip(1) {
            let target = link.split(')').next().unwrap_or_default();
            if target.starts_with("http") || target.starts_with('#') {
                continue;
            }
            linked += 1;
            let base = Path::new(&name).parent().unwrap_or(Path::new(""));
            if !root.join(base).join(target).exists() {
                missing.push(format!("{name}: {target}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "linked but not there:\n{}",
        missing.join("\n")
    );
    // The README links each page of docs/.
    let pages = documents().len() - 1;
    assert!(linked >= pages, "{linked} links for {pages} pages");
}

/// The README's Rust code is the workaround that repro's testsuite runs on the published crates
/// (`workaround.rs`, between its `README` markers), so it compiles and does what it says.
#[test]
fn the_readme_workaround_is_the_tested_one() {
    let root = root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let shown = readme
        .split("```rust\n")
        .nth(1)
        .expect("the README shows Rust code");
    let shown = shown.split("```").next().unwrap();
    let test = "crates/repro/tests/testsuite/workaround.rs";
    let test = std::fs::read_to_string(root.join(test)).unwrap();
    let tested = test.split("// README begin\n").nth(1).unwrap();
    let tested = tested.split("// README end").next().unwrap();
    assert_eq!(shown, tested);
}

/// The README names the branch of every proposed patch, as `pr` names it.
#[test]
fn the_readme_names_each_proposed_branch() -> anyhow::Result<()> {
    let dir = root().join("patches");
    let readme = std::fs::read_to_string(root().join("README.md"))?;
    let stack = xtask::series::Series::load(&dir)?.stack;
    let (proposed, _) = stack.split_carried(xtask::series::Series::load(&dir)?.patches);
    assert!(!proposed.is_empty());
    for patch in proposed {
        let branch = xtask::pr::stack::branch_name("", &patch.message);
        assert!(
            readme.contains(&format!("`{branch}`")),
            "the README lacks {branch}"
        );
    }
    Ok(())
}
