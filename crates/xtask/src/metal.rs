//! Metal, type-checked on Linux: candle's `metal` feature only builds for Apple's targets, and
//! nothing here can link or run it, but clippy for `aarch64-apple-darwin` compiles every line.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, ensure, Result};

use crate::cmd;
use crate::pin::{self, Pin};
use crate::project::{self, Layout};

pub const TARGET: &str = "aarch64-apple-darwin";

/// What the cross-check needs that a fresh machine may lack, with the command that installs it.
const NEEDS: [(&str, &str); 3] = [
    ("clang", "apt-get install clang"),
    ("pkg-config", "apt-get install pkg-config"),
    ("rustup", "the rustup that manages this toolchain"),
];

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

/// The environment of a cross-check: clang compiles C for Apple without its SDK (no libc
/// headers), oniguruma comes from the system (nothing links it), and `target-cpu=native` goes.
pub fn cross_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("CC_aarch64_apple_darwin", "clang"),
        (
            "CFLAGS_aarch64_apple_darwin",
            "--target=arm64-apple-macos11 -ffreestanding",
        ),
        ("RUSTONIG_SYSTEM_LIBONIG", "1"),
        ("PKG_CONFIG_ALLOW_CROSS", "1"),
        ("RUSTFLAGS", ""),
    ]
}

/// Fails with what to install when the machine cannot cross-check (`onig`: oniguruma too).
pub fn preflight(onig: bool) -> Result<()> {
    let succeeds = |program: &str, args: &[&str]| {
        cmd::stdout_of(program, Command::new(program).args(args)).ok()
    };
    let lacks = |(tool, _): &(&str, &str)| succeeds(tool, &["--version"]).is_none();
    let named = |(tool, how): (&str, &str)| format!("{tool} ({how})");
    let mut missing: Vec<String> = NEEDS.into_iter().filter(lacks).map(named).collect();
    let targets = succeeds("rustup", &["target", "list", "--installed"]).unwrap_or_default();
    let library = format!("the {TARGET} standard library (rustup target add {TARGET})");
    if !targets.contains(TARGET) {
        missing.push(library);
    }
    if onig && succeeds("pkg-config", &["--exists", "oniguruma"]).is_none() {
        missing.push("oniguruma's development files (apt-get install libonig-dev)".into());
    }
    ensure!(
        missing.is_empty(),
        "the Metal cross-check for {TARGET} needs {}",
        missing.join(", ")
    );
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
