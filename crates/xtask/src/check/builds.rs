//! How the workspace builds, as `check` keeps it: each crate once, and few test binaries.
//!
//! `cargo repro` and `cargo xtask` are `cargo run --bin`, which resolves features over the
//! workspace's normal dependencies; `cargo test` adds the dev-dependencies. Where a
//! dev-dependency turns on a feature of a crate that candle builds on too, cargo builds that
//! crate, and every crate above it, candle included, a second time. And every test harness is a
//! binary that links candle: a file under `tests/` belongs in its crate's one testsuite, and a
//! target without unit tests builds no harness.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{ensure, Result};
use cargo_metadata::{Metadata, Target, TargetKind};
use fs_err as fs;

use crate::cmd;

/// Fails, naming each crate and target, unless `cargo run --bin` and `cargo test` resolve every
/// crate with the same features, and every workspace crate has at most one test binary and
/// builds harnesses only for targets with tests. `graph` is the workspace at `root`. Returns what
/// it proved.
pub fn check(root: &Path, graph: &Metadata) -> Result<Vec<super::Proved>> {
    let run = features(root, "normal,build")?;
    let test = features(root, "normal,build,dev")?;
    let differ: Vec<String> = run
        .iter()
        .filter_map(|(package, features)| {
            let more: Vec<&str> = test
                .get(package)?
                .difference(features)
                .map(|f| &**f)
                .collect();
            (!more.is_empty()).then(|| format!("{package}: {}", more.join(", ")))
        })
        .collect();
    ensure!(
        differ.is_empty(),
        "`cargo test` turns on features that `cargo repro` and `cargo xtask` leave off, so cargo \
         builds these crates, and every crate above them, twice:\n    {}\nturn them on in a \
         normal dependency, as crates/testbed/Cargo.toml does for getrandom",
        differ.join("\n    ")
    );
    let mut problems = Vec::new();
    for package in graph.workspace_packages() {
        let name = &package.name;
        let suites: Vec<&str> = package
            .targets
            .iter()
            .filter(|t| t.kind.contains(&TargetKind::Test))
            .map(|t| &*t.name)
            .collect();
        if suites.len() > 1 {
            problems.push(format!(
                "{name} has {} test binaries ({}): make each file a module of \
                 tests/testsuite/main.rs, which links once",
                suites.len(),
                suites.join(", ")
            ));
        }
        let others: Vec<&Path> = package
            .targets
            .iter()
            .map(|t| t.src_path.as_std_path())
            .collect();
        for target in package.targets.iter().filter(|t| unit(t)) {
            let text = sources(target, &others)?;
            let what = format!("{name}'s {} target {}", target.kind[0], target.name);
            let has_tests = text.contains("#[cfg(test)]") || text.contains("#[test]");
            if target.test != has_tests {
                problems.push(if has_tests {
                    format!("{what} has unit tests that never run: set `test = true`")
                } else {
                    format!("{what} builds a test harness with no test: set `test = false`")
                });
            }
            let has_doctests = text.lines().any(|l| {
                let l = l.trim_start();
                (l.starts_with("///") || l.starts_with("//!")) && l.contains("```")
            });
            if target.doctest && !has_doctests {
                problems.push(format!(
                    "{what} runs rustdoc for no doctest: set `doctest = false`"
                ));
            }
        }
    }
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(vec![
        super::Proved::OneFeatureSet,
        super::Proved::OneTestBinary,
    ])
}

/// Each package's features, over every place it appears, in the build that `edges` describes,
/// from `cargo tree` in the format it offers scripts (`--prefix none --format`).
fn features(root: &Path, edges: &str) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let mut cargo = cmd::cargo();
    let options = ["--locked", "--offline", "--workspace", "--prefix", "none"];
    let command = cargo.current_dir(root).arg("tree").args(options);
    let command = command.args(["--format", "{p}|{f}", "--edges", edges]);
    let text = cmd::stdout_of(&format!("`cargo tree --edges {edges}`"), command)?;
    let mut packages = BTreeMap::<String, BTreeSet<String>>::new();
    for line in text.lines().map(|line| line.trim_end_matches(" (*)")) {
        if let Some((package, features)) = line.split_once('|') {
            let features = features.split(',').filter(|f| !f.is_empty());
            let entry = packages.entry(package.to_string()).or_default();
            entry.extend(features.map(String::from));
        }
    }
    Ok(packages)
}

/// A library or binary: the targets that may hold unit tests and doctests.
fn unit(target: &Target) -> bool {
    target
        .kind
        .iter()
        .any(|k| matches!(k, TargetKind::Lib | TargetKind::Bin))
}

/// The text of `target`'s sources: a binary's file, or every `.rs` file beside and below a
/// library's root that is no other target's root.
fn sources(target: &Target, roots: &[&Path]) -> Result<String> {
    let root = target.src_path.as_std_path();
    if !target.kind.contains(&TargetKind::Lib) {
        return Ok(fs::read_to_string(root)?);
    }
    let mut text = String::new();
    let mut dirs = vec![root.parent().unwrap_or(Path::new(".")).to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            // A crate's `tests/` and the target folder hold no library code.
            let skipped = ["tests", "target"].map(|name| Some(name.as_ref()));
            if path.is_dir() {
                if !skipped.contains(&path.file_name()) {
                    dirs.push(path);
                }
            } else if path.extension() == Some("rs".as_ref())
                && (path == root || !roots.contains(&path.as_path()))
            {
                text += &fs::read_to_string(&path)?;
            }
        }
    }
    Ok(text)
}
