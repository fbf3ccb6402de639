//! `--verify`: candle's CI commands (`.github/workflows/rust-ci.yml`) for what each branch touches.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use fs_err as fs;
use git2::{Delta, Oid, Repository};

use crate::cmd;
use crate::fsutil::{swap_in, temp_in};
use crate::{cross, trees};

/// A cargo command of candle's CI; `cross_metal` marks the Metal type-check, compiled, never run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    pub args: Vec<String>,
    pub cross_metal: bool,
}

impl Command {
    /// `cargo <verb> -p <package>... <flags>`.
    pub fn new(verb: &str, packages: &[String], flags: &str, cross_metal: bool) -> Command {
        let packages = packages.iter().flat_map(|p| ["-p", p.as_str()]);
        let args = std::iter::once(verb)
            .chain(packages)
            .chain(flags.split_whitespace());
        Command {
            args: args.map(String::from).collect(),
            cross_metal,
        }
    }

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

/// The packages a branch changes, the members using a module it changes, and the changed ones
/// with a `metal` feature.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Crates {
    pub touched: Vec<String>,
    pub dependents: Vec<String>,
    pub metal: Vec<String>,
}

/// candle's CI commands for `crates`: fmt, clippy (and dependents), tests, a Metal cross-check.
pub fn commands(crates: &Crates) -> Vec<Command> {
    let command = Command::new;
    let linted = [&crates.touched[..], &crates.dependents].concat();
    let lints = "--tests --examples --benches -- -D warnings";
    let mut commands = vec![
        command("fmt", &[], "--all -- --check", false),
        command("clippy", &linted, lints, false),
        command("test", &crates.touched, "", false),
    ];
    if !crates.metal.is_empty() {
        let flags = format!("--features metal --target {}", cross::TARGET);
        commands.push(command("check", &crates.metal, &flags, true));
    }
    commands
}

/// The members that the changes from `from` to `tree` touch, and those using what they change;
/// `dir` holds the export of `tree`.
pub fn crates(repo: &Repository, from: Oid, tree: Oid, dir: &Path) -> Result<Crates> {
    let metadata = cmd::metadata(&dir.join("Cargo.toml"))?;
    let root = &metadata.workspace_root;
    // Each member with its folder, sorted by folder, so that the dependents come out in one
    // fixed order (cargo lists the packages by name).
    let mut members = Vec::new();
    for package in &metadata.packages {
        let folder = package.manifest_path.parent().unwrap_or(root);
        let outside = || format!("{folder} is outside {root}");
        let folder = folder.strip_prefix(root).with_context(outside)?;
        members.push((package, folder));
    }
    members.sort_by_key(|(_, folder)| *folder);
    let diff = crate::git::diff_trees(repo, from, tree)?;
    let (mut crates, mut modules) = (Crates::default(), Vec::new());
    for path in crate::git::paths(&diff) {
        // The member whose folder is the nearest above the file is its crate.
        let member = |d| members.iter().find(|(_, f)| f.as_std_path() == d);
        let Some((package, folder)) = path.ancestors().skip(1).find_map(member) else {
            // A file of a crate outside the workspace (as candle's kernels are) no command covers.
            let manifest =
                |d: &&Path| !d.as_os_str().is_empty() && dir.join(d).join("Cargo.toml").is_file();
            if let Some(krate) = path.ancestors().skip(1).find(manifest) {
                let (path, krate) = (path.display(), krate.display());
                bail!(
                    "{path} is in {krate}, which is not a member of the workspace: candle's CI \
                     commands do not check it; check it by hand, or run pr without --verify"
                );
            }
            continue;
        };
        let name = package.name.to_string();
        if !crates.touched.contains(&name) {
            if package.features.contains_key("metal") {
                crates.metal.push(name.clone());
            }
            crates.touched.push(name);
        }
        modules.extend(module_of(&path.to_string_lossy(), folder.as_str()));
    }
    // Members that depend on a touched crate (under any name, kind or target) and name a changed
    // module (as in `generation::LogitsProcessor`) are its dependents.
    let whole = repo.find_tree(tree)?;
    for (package, folder) in members {
        let touched = &crates.touched;
        let depends = |d: &cargo_metadata::Dependency| touched.contains(&d.name);
        if touched.contains(&package.name) || !package.dependencies.iter().any(depends) {
            continue;
        }
        let member_tree = match folder.as_str() {
            "" => tree,
            folder => whole.get_path(Path::new(folder))?.id(),
        };
        for file in crate::git::rust_files(repo, member_tree)? {
            let (_, text) = file?;
            if modules.iter().any(|m| text.contains(m.as_str())) {
                crates.dependents.push(package.name.to_string());
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
    let Some(previous) = previous.filter(|_| dir.is_dir()) else {
        let parent = dir.parent().context("the export has no parent folder")?;
        let temp = temp_in(parent, "export")?;
        let staged = temp.path().join("tree");
        trees::write_tree(repo, tree, &staged)?;
        return swap_in(&[(staged, dir.to_path_buf())]);
    };
    let diff = crate::git::diff_trees(repo, previous, tree)?;
    for delta in diff.deltas() {
        let (status, new) = (delta.status(), delta.new_file());
        if let (Delta::Deleted | Delta::Renamed, Some(old)) = (status, delta.old_file().path()) {
            let _ = fs::remove_file(dir.join(old));
        }
        if status == Delta::Deleted {
            continue;
        }
        if let Some(path) = new.path() {
            let target = dir.join(path);
            fs::create_dir_all(target.parent().unwrap_or(dir))?;
            // Written anew, so that a file that changes mode or becomes a link gets it.
            let _ = fs::remove_file(&target);
            trees::write_blob(repo, new.id(), new.mode().into(), &target)?;
        }
    }
    Ok(())
}

/// Whether `tree` builds: `cargo check --tests` of the members that its change from `base`
/// touches, in an export of it under `dir`. A tree that cargo cannot read as a workspace does not.
pub fn builds(repo: &Repository, base: Oid, tree: Oid, dir: &Path, what: &str) -> Result<bool> {
    fs::create_dir_all(dir)?;
    let export_dir = dir.join("candle");
    export(repo, None, tree, &export_dir)?;
    let crates = match crates(repo, base, tree, &export_dir) {
        Ok(crates) => crates,
        Err(err) => {
            eprintln!("{what}: not a cargo workspace, so it does not build: {err:#}");
            return Ok(false);
        }
    };
    let command = Command::new("check", &crates.touched, "--tests", false);
    eprintln!("{what}: taken in place of the candidate before it, so checking that it builds");
    let checks = run(&export_dir, &dir.join("target"), &[command])?;
    Ok(checks.iter().all(|check| check.passed))
}

/// Runs `commands` in `dir` with cargo's build folder `target_dir`, printing a line each.
pub fn run(dir: &Path, target_dir: &Path, commands: &[Command]) -> Result<Vec<Check>> {
    let run = |command: &Command| -> Result<Check> {
        let started = Instant::now();
        eprintln!("running {} (cargo's progress follows)", command.text());
        // candle's own toolchain, not the one that runs xtask.
        let mut cargo = std::process::Command::new("cargo");
        cargo
            .args(&command.args)
            .current_dir(dir)
            .env("CARGO_TARGET_DIR", target_dir)
            .env_remove("CARGO")
            .env_remove("RUSTUP_TOOLCHAIN");
        if command.cross_metal {
            cargo.envs(cross::cross_env());
        }
        let cannot = || format!("cannot run {}", command.text());
        let passed = cargo.status().with_context(cannot)?.success();
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
#[path = "../../tests/private/pr_verify.rs"]
mod tests;
