//! `--verify`: on each branch of the stack, the commands of candle's CI
//! (`.github/workflows/rust-ci.yml`) that a pull request touching these crates must pass, run in
//! an export of the branch beside the workspace's target folder; the clone is not touched.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use git2::{Delta, Oid, Repository};

use crate::fsutil::temp_in;
use crate::{manifest, metal, trees};

/// A cargo command of candle's CI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// The arguments after `cargo`.
    pub args: Vec<String>,
    /// A type-check for Apple's target with `metal`, in `metal::cross_env`: compiled, never run.
    pub cross_metal: bool,
}

impl Command {
    pub fn text(&self) -> String {
        format!("cargo {}", self.args.join(" "))
    }
}

/// A command and how it went.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub command: Command,
    pub passed: bool,
    pub seconds: f64,
}

/// The crates a branch touches and those that use what it touches: what its checks cover.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Crates {
    /// Packages with a file the patch changes.
    pub touched: Vec<String>,
    /// Workspace members that depend on a touched package and use a module the patch changes.
    pub dependents: Vec<String>,
    /// The touched packages that have a `metal` feature.
    pub metal: Vec<String>,
}

/// candle's CI commands for `crates`: formatting of the whole workspace; clippy with tests,
/// examples and benches, warnings denied, over the touched crates and their dependents; the
/// touched crates' tests; and, as candle's macOS job checks `--features metal`, a cross-check
/// of the touched crates that have that feature.
pub fn commands(crates: &Crates) -> Vec<Command> {
    // `cargo <verb> -p <package>... <flags>`.
    let command = |verb: &str, packages: Vec<&String>, flags: &str, cross_metal| Command {
        args: std::iter::once(verb)
            .chain(packages.into_iter().flat_map(|p| ["-p", p.as_str()]))
            .chain(flags.split_whitespace())
            .map(String::from)
            .collect(),
        cross_metal,
    };
    let mut commands = vec![
        command("fmt", Vec::new(), "--all -- --check", false),
        command(
            "clippy",
            crates.touched.iter().chain(&crates.dependents).collect(),
            "--tests --examples --benches -- -D warnings",
            false,
        ),
        command("test", crates.touched.iter().collect(), "", false),
    ];
    if !crates.metal.is_empty() {
        let flags = format!("--features metal --target {}", metal::TARGET);
        let check = command("check", crates.metal.iter().collect(), &flags, true);
        commands.push(check);
    }
    commands
}

/// The jobs of candle's CI that `--verify` cannot run on this machine; their Metal check is
/// cross-compiled instead.
pub const NOT_RUN: &str = "candle's macOS, CUDA and Windows jobs (Metal is checked for \
                           aarch64-apple-darwin, cross, not run)";

/// Which crates of the tree `tree` the changes from `from` to `tree` touch and reach.
pub fn crates(repo: &Repository, from: Oid, tree: Oid) -> Result<Crates> {
    let tree_obj = repo.find_tree(tree)?;
    let diff = repo.diff_tree_to_tree(Some(&repo.find_tree(from)?), Some(&tree_obj), None)?;
    let read = |path: &str| -> Option<String> {
        let entry = tree_obj.get_path(Path::new(path)).ok()?;
        let blob = repo.find_blob(entry.id()).ok()?;
        Some(String::from_utf8_lossy(blob.content()).into_owned())
    };
    let mut touched = Vec::new();
    let mut metal = Vec::new();
    let mut modules = Vec::new();
    for delta in diff.deltas() {
        let Some(path) = delta.new_file().path().or(delta.old_file().path()) else {
            continue;
        };
        let path = path.to_string_lossy().into_owned();
        // The nearest folder above the file with a manifest is its crate.
        for dir in Path::new(&path).ancestors().skip(1) {
            let text = read(&dir.join("Cargo.toml").to_string_lossy()).unwrap_or_default();
            let Some(name) = manifest::package_name(&text) else {
                continue;
            };
            if !touched.contains(&name) {
                if manifest::has_feature(&text, "metal") {
                    metal.push(name.clone());
                }
                touched.push(name);
            }
            modules.extend(module_of(&path, &dir.to_string_lossy()));
            break;
        }
    }
    let mut dependents = Vec::new();
    for member in members(repo, &tree_obj, &read("Cargo.toml").unwrap_or_default())? {
        let Some(manifest) = read(&format!("{member}/Cargo.toml")) else {
            continue;
        };
        let Some(name) = manifest::package_name(&manifest) else {
            continue;
        };
        if touched.contains(&name)
            || !touched.iter().any(|t| manifest::depends_on(&manifest, t))
            || !uses_any(repo, &tree_obj, &member, &modules)?
        {
            continue;
        }
        dependents.push(name);
    }
    Ok(Crates {
        touched,
        dependents,
        metal,
    })
}

/// `candle-transformers/src/generation/mod.rs` in `candle-transformers` -> `generation::`.
fn module_of(path: &str, crate_dir: &str) -> Option<String> {
    let inner = path.strip_prefix(&format!("{crate_dir}/src/"))?;
    let inner = inner.strip_suffix(".rs")?;
    let inner = inner.strip_suffix("/mod").unwrap_or(inner);
    if inner == "lib" || inner == "main" {
        return None;
    }
    Some(format!("{}::", inner.replace('/', "::")))
}

/// Whether a Rust file under `dir` names one of `modules` (as in `generation::LogitsProcessor`).
fn uses_any(
    repo: &Repository,
    tree: &git2::Tree<'_>,
    dir: &str,
    modules: &[String],
) -> Result<bool> {
    let Ok(entry) = tree.get_path(Path::new(dir)) else {
        return Ok(false);
    };
    let sub = repo.find_tree(entry.id())?;
    let mut found = false;
    sub.walk(git2::TreeWalkMode::PreOrder, |_, entry| {
        if entry.name().is_ok_and(|n| n.ends_with(".rs")) {
            if let Ok(blob) = repo.find_blob(entry.id()) {
                let text = String::from_utf8_lossy(blob.content());
                if modules.iter().any(|m| text.contains(m.as_str())) {
                    found = true;
                    return git2::TreeWalkResult::Abort;
                }
            }
        }
        git2::TreeWalkResult::Ok
    })
    .or_else(|err| if found { Ok(()) } else { Err(err) })?;
    Ok(found)
}

/// The workspace members of the root manifest: its `members` list, `dir/*` expanded from `tree`.
fn members(repo: &Repository, tree: &git2::Tree<'_>, manifest: &str) -> Result<Vec<String>> {
    let mut members = Vec::new();
    for item in manifest::members(manifest) {
        match item.strip_suffix("/*") {
            Some(dir) => {
                if let Ok(entry) = tree.get_path(Path::new(dir)) {
                    for child in repo.find_tree(entry.id())?.iter() {
                        if child.kind() == Some(git2::ObjectType::Tree) {
                            members.push(format!("{dir}/{}", child.name().unwrap_or_default()));
                        }
                    }
                }
            }
            None => members.push(item),
        }
    }
    Ok(members)
}

/// Makes `dir` hold `tree`: the first time by writing it whole, after that by writing only what
/// differs from `previous`, so that cargo rebuilds only the crates a branch changes.
pub fn export(repo: &Repository, previous: Option<Oid>, tree: Oid, dir: &Path) -> Result<()> {
    let Some(previous) = previous.filter(|_| dir.is_dir()) else {
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        let parent = dir.parent().context("the export has no parent folder")?;
        std::fs::create_dir_all(parent)?;
        let temp = temp_in(parent, "export")?;
        let staged = temp.path().join("tree");
        trees::write_tree(repo, tree, &staged)?;
        std::fs::rename(&staged, dir)?;
        return Ok(());
    };
    let new_tree = repo.find_tree(tree)?;
    let diff = repo.diff_tree_to_tree(Some(&repo.find_tree(previous)?), Some(&new_tree), None)?;
    for delta in diff.deltas() {
        if let Some(old) = delta.old_file().path() {
            if matches!(delta.status(), Delta::Deleted | Delta::Renamed) {
                let _ = std::fs::remove_file(dir.join(old));
            }
        }
        if delta.status() == Delta::Deleted {
            continue;
        }
        let Some(path) = delta.new_file().path() else {
            continue;
        };
        let entry = new_tree.get_path(path)?;
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, repo.find_blob(entry.id())?.content())?;
    }
    Ok(())
}

/// Runs `commands` in `dir` with cargo's build folder `target_dir`, printing a line each.
pub fn run(dir: &Path, target_dir: &Path, commands: &[Command]) -> Result<Vec<Check>> {
    let mut checks = Vec::new();
    for command in commands {
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
        checks.push(Check {
            command: command.clone(),
            passed,
            seconds,
        });
    }
    Ok(checks)
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
