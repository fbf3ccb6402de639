//! Cross-checking for Apple's targets, which `metal-check` and `pr --verify` both do: candle's
//! `metal` feature only builds there, and nothing here can link or run it.

use std::process::Command;

use anyhow::{ensure, Result};

use crate::cmd;

pub(crate) const TARGET: &str = "aarch64-apple-darwin";

/// What the cross-check needs that a fresh machine may lack, with the command that installs it.
const NEEDS: [(&str, &str); 3] = [
    ("clang", "apt-get install clang"),
    ("pkg-config", "apt-get install pkg-config"),
    ("rustup", "the rustup that manages this toolchain"),
];

/// The environment of a cross-check: clang compiles C for Apple without its SDK (no libc
/// headers), oniguruma comes from the system (nothing links it), and `target-cpu=native` goes.
pub(crate) fn cross_env() -> Vec<(&'static str, &'static str)> {
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
pub(crate) fn preflight(onig: bool) -> Result<()> {
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
