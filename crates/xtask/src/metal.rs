//! Metal, type-checked on Linux: candle's `metal` feature only builds for Apple's targets, and
//! nothing here can link or run it, but clippy for `aarch64-apple-darwin` compiles every line.

use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::cmd;
use crate::cross::{cross_env, preflight, TARGET};
use crate::pin::{self, Pin};
use crate::project::{self, Layout};

/// `cargo xtask metal-check`: clippy for Apple with `metal`, on members and the vendored libraries.
pub fn run(layout: &Layout) -> Result<()> {
    preflight(false)?;
    let members = with_metal([layout.root.clone()])?;
    let vendored_dir = |pin: &Pin| layout.root.join(project::vendored_dir(&pin.name));
    let pins = pin::read(&layout.pin())?;
    let vendored = with_metal(pins.iter().map(vendored_dir))?;
    if members.is_empty() {
        bail!("no workspace member has a `metal` feature");
    }
    // Only members' features can be named; theirs turn on the vendored crates' `metal` too.
    let features: Vec<String> = members.iter().map(|name| format!("{name}/metal")).collect();
    let libraries: Vec<String> = vendored.iter().chain(&members).cloned().collect();
    for (crates, targets) in [(members, "--all-targets"), (libraries, "--lib")] {
        let names = crates.join(", ");
        eprintln!("metal-check: {names} ({targets}) for {TARGET}, type-checked, not linked or run");
        let mut clippy = cmd::cargo();
        clippy
            .current_dir(&layout.root)
            .args(["clippy", "--locked", "--features", &features.join(",")])
            .args(crates.iter().flat_map(|name| ["-p", name.as_str()]))
            .args([targets, "--target", TARGET, "--", "-D", "warnings"])
            .envs(cross_env());
        let failed = format!("cargo clippy for {TARGET} with `metal` failed on {names}");
        cmd::run_checked(&mut clippy, &failed)?;
    }
    Ok(())
}

/// Of the packages of the workspaces (or packages) in the folders `dirs`, those with a `metal`
/// feature, sorted.
fn with_metal(dirs: impl IntoIterator<Item = PathBuf>) -> Result<Vec<String>> {
    let mut crates = Vec::new();
    for dir in dirs {
        let manifest = dir.join("Cargo.toml");
        let packages = cmd::metadata(&manifest)?.packages.into_iter();
        let metal = packages.filter(|p| p.features.contains_key("metal"));
        crates.extend(metal.map(|p| p.name.to_string()));
    }
    crates.sort();
    Ok(crates)
}
