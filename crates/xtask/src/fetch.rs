//! `cargo xtask fetch`: every pinned crate into cargo's cache, its sha256 checked, so that `check`
//! and the tests run offline; and the fuzzer's dependencies, with its lock file held current.

use anyhow::Result;

use crate::cmd;
use crate::project::{Layout, FUZZ_MANIFEST};
use crate::published;

pub fn run(layout: &Layout) -> Result<()> {
    for pin in &crate::pin::read(&layout.pin())? {
        published::load_or_fetch(layout, pin)?;
        let (label, sha256) = (pin.label(), &pin.sha256);
        eprintln!("ok: {label} is in cargo's cache, sha256 {sha256}");
    }
    // The fuzzer is a workspace of its own: `--locked` fails on a stale lock, with the fix.
    let fuzz = layout.root.join(FUZZ_MANIFEST);
    if fuzz.is_file() {
        let mut fetch = cmd::cargo();
        fetch.args(["fetch", "--locked", "--manifest-path"]);
        let failed = format!(
            "`cargo fetch --locked` failed for {FUZZ_MANIFEST}: if it says the lock file needs \
             updating, run `cargo update --workspace --manifest-path {FUZZ_MANIFEST}`"
        );
        cmd::run_checked(fetch.arg(&fuzz), &failed)?;
        eprintln!("ok: the dependencies of {FUZZ_MANIFEST} are in cargo's cache");
    }
    Ok(())
}
