//! `--verify`: candle's CI commands (`.github/workflows/rust-ci.yml`) for what each branch touches.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use git2::{Delta, ObjectType, Oid, Repository};

use crate::fsutil::{swap_in, temp_in};
use crate::{manifest, metal, trees};

/// A cargo command of candle's CI; `cross_metal` marks the Metal type-check, compiled, never run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    pub args: Vec<String>,
    pub cross_metal: bool,
}

impl Command {
    pub fn text(&self) -> String {
        format!("cargo {}", self.args.join(" "))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub command: Command,
    pub passed: bool,
    pub seconds: f64,
}

/// The packages a branch changes, the members using a module it changes, and those with `metal`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Crates {
    pub touched: Vec<String>,
    pub dependents: Vec<String>,
    pub metal: Vec<String>,
}

/// candle's CI commands for `crates`: fmt, clippy (and dependents), tests, a Metal cross-check.
pub fn commands(crates: &Crates) -> Vec<Command> {
    // `cargo <verb> -p <package>... <flags>`.
    let command = |verb: &str, packages: &[String], flags: &str, cross_metal| Command {
        args: std::iter::once(verb)
            .chain(packages.iter().flat_map(|p| ["-p", p.as_str()]))
            .chain(flags.split_whitespace())
            .map(String::from)
            .collect(),
        cross_metal,
    };
    let linted = [&crates.touched[..], &crates.dependents].concat();
    let lints = "--tests --examples --benches -- -D warnings";
    let mut commands = vec![
        command("fmt", &[], "--all -- --check", false),
        command("clippy", &linted, lints, false),
        command("test", &crates.touched, "", false),
    ];
    if !crates.metal.is_empty() {
        let flags = format!("--features metal --target {}", metal::TARGET);
        commands.push(command("check", &crates.metal, &flags, true));
    }
    commands
}

/// Which crates of the tree `tree` the changes from `from` to `tree` touch and reach.
pub fn crates(repo: &Repository, from: Oid, tree: Oid) -> Result<Crates> {
    let tree_obj = repo.find_tree(tree)?;
    let diff = repo.diff_tree_to_tree(Some(&repo.find_tree(from)?), Some(&tree_obj), None)?;
    let read = |dir: &Path| -> Option<String> {
        let entry = tree_obj.get_path(&dir.join("Cargo.toml")).ok()?;
        let blob = repo.find_blob(entry.id()).ok()?;
        Some(String::from_utf8_lossy(blob.content()).into_owned())
    };
    // The manifest in `dir`, with the name of its package.
    let package = |dir: &Path| read(dir).and_then(|t| Some((manifest::package_name(&t)?, t)));
    let (mut crates, mut modules) = (Crates::default(), Vec::new());
    for delta in diff.deltas() {
        let Some(path) = delta.new_file().path().or(delta.old_file().path()) else {
            continue;
        };
        // The nearest folder above the file with a manifest is its crate.
        let mut dirs = path.ancestors().skip(1);
        let Some((dir, (name, text))) = dirs.find_map(|dir| Some((dir, package(dir)?))) else {
            continue;
        };
        if !crates.touched.contains(&name) {
            if manifest::has_feature(&text, "metal") {
                crates.metal.push(name.clone());
            }
            crates.touched.push(name);
        }
        modules.extend(module_of(&path.to_string_lossy(), &dir.to_string_lossy()));
    }
    // The workspace's members, `dir/*` expanded: those that depend on a touched crate and name a
    // changed module (as in `generation::LogitsProcessor`) are its dependents.
    let mut members = Vec::new();
    for item in manifest::members(&read(Path::new("")).unwrap_or_default()) {
        let Some(dir) = item.strip_suffix("/*") else {
            members.push(item);
            continue;
        };
        if let Ok(entry) = tree_obj.get_path(Path::new(dir)) {
            let children = repo.find_tree(entry.id())?;
            let is_dir = |c: &git2::TreeEntry<'_>| c.kind() == Some(ObjectType::Tree);
            let subdirs = children.iter().filter(is_dir);
            members.extend(subdirs.map(|c| format!("{dir}/{}", c.name().unwrap_or_default())));
        }
    }
    for member in members {
        let Some((name, text)) = package(Path::new(&member)) else {
            continue;
        };
        let touched = &crates.touched;
        if touched.contains(&name) || !touched.iter().any(|t| manifest::depends_on(&text, t)) {
            continue;
        }
        let member_tree = tree_obj.get_path(Path::new(&member))?.id();
        for file in crate::git::rust_files(repo, member_tree)? {
            let (_, text) = file?;
            if modules.iter().any(|m| text.contains(m.as_str())) {
                crates.dependents.push(name);
                break;
            }
        }
    }
    Ok(crates)
}

/// `candle-transformers/src/generation/mod.rs` in `candle-transformers` -> `generation::`.
fn module_of(path: &str, crate_dir: &str) -> Option<String> {
    let inner = path.strip_prefix(&format!("{crate_dir}/src/"))?;
    let inner = inner.strip_suffix(".rs")?;
    let inner = inner.strip_suffix("/mod").unwrap_or(inner);
    let lib = inner == "lib" || inner == "main";
    (!lib).then(|| format!("{}::", inner.replace('/', "::")))
}

/// Makes `dir` hold `tree`, writing only what differs from `previous` so cargo rebuilds little.
pub fn export(repo: &Repository, previous: Option<Oid>, tree: Oid, dir: &Path) -> Result<()> {
    let previous = match previous {
        Some(previous) if dir.is_dir() => previous,
        _ => {
            let parent = dir.parent().context("the export has no parent folder")?;
            std::fs::create_dir_all(parent)?;
            let temp = temp_in(parent, "export")?;
            let staged = temp.path().join("tree");
            trees::write_tree(repo, tree, &staged)?;
            return swap_in(&[(staged, dir.to_path_buf())]);
        }
    };
    let old_tree = repo.find_tree(previous)?;
    let new_tree = repo.find_tree(tree)?;
    let diff = repo.diff_tree_to_tree(Some(&old_tree), Some(&new_tree), None)?;
    for delta in diff.deltas() {
        let status = delta.status();
        if matches!(status, Delta::Deleted | Delta::Renamed) {
            if let Some(old) = delta.old_file().path() {
                let _ = std::fs::remove_file(dir.join(old));
            }
        }
        if status != Delta::Deleted {
            let new = delta.new_file();
            if let Some(path) = new.path() {
                let target = dir.join(path);
                std::fs::create_dir_all(target.parent().unwrap_or(dir))?;
                std::fs::write(&target, repo.find_blob(new.id())?.content())?;
            }
        }
    }
    Ok(())
}

/// Runs `commands` in `dir` with cargo's build folder `target_dir`, printing a line each.
pub fn run(dir: &Path, target_dir: &Path, commands: &[Command]) -> Result<Vec<Check>> {
    let run = |command: &Command| -> Result<Check> {
        let started = Instant::now();
        let mut cargo = std::process::Command::new("cargo");
        cargo
            .args(&command.args)
            .current_dir(dir)
            .env("CARGO_TARGET_DIR", target_dir)
            .env_remove("CARGO")
            .env_remove("RUSTUP_TOOLCHAIN");
        if command.cross_metal {
            cargo.envs(metal::cross_env());
        }
        let passed = cargo
            .status()
            .with_context(|| format!("cannot run {}", command.text()))?
            .success();
        let seconds = started.elapsed().as_secs_f64();
        let result = if passed { "pass" } else { "FAIL" };
        eprintln!("{result}  {} ({seconds:.1} s)", command.text());
        Ok(Check {
            command: command.clone(),
            passed,
            seconds,
        })
    };
    commands.iter().map(run).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_and_modules_are_read() {
        let manifest = "[package]\nname = \"candle-examples\"\n\n[dependencies]\ncandle-transformers = { workspace = true }\n";
        assert_eq!(
            manifest::package_name(manifest).as_deref(),
            Some("candle-examples")
        );
        assert!(manifest::depends_on(manifest, "candle-transformers"));
        assert!(!manifest::depends_on(manifest, "candle-nn"));
        assert_eq!(
            module_of("candle-nn/src/sampling.rs", "candle-nn").as_deref(),
            Some("sampling::")
        );
        assert_eq!(
            module_of(
                "candle-transformers/src/generation/mod.rs",
                "candle-transformers"
            )
            .as_deref(),
            Some("generation::")
        );
        assert_eq!(
            module_of(
                "candle-transformers/tests/generation_tests.rs",
                "candle-transformers"
            ),
            None
        );
    }
}
