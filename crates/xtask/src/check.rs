//! `cargo xtask check`: the generated folders are exactly the published crate + `patches/`, and
//! cargo builds the patched crate. Offline: it needs the `.crate` in cargo's cache.

use anyhow::{bail, Context, Result};

use crate::branches;
use crate::expected;
use crate::patch_use;
use crate::pin;
use crate::project::{self, Applied, Layout, Source};
use crate::published::{self, Published};
use crate::series;
use crate::trees::Scratch;

pub fn run(layout: &Layout) -> Result<()> {
    let pins = pin::read(&layout.pin())?;
    let published = pins
        .iter()
        .map(published::load_pinned)
        .collect::<Result<Vec<_>>>()?;
    check_generated(layout, &published)?;
    let lock = std::fs::read_to_string(layout.lockfile()).context("cannot read Cargo.lock")?;
    for pin in &pins {
        let vendored = layout.root.join(project::vendored_dir(&pin.name));
        patch_use::check_lock(&lock, &pin.name, &pin.version)?;
        patch_use::check_cargo(&layout.root, &pin.name, &vendored)?;
        eprintln!(
            "ok: cargo builds {} from {}",
            pin.name,
            layout.show(&vendored)
        );
    }
    check_fuzz_lock(layout)
}

/// The fuzzer is a workspace of its own (cargo-fuzz builds it with other flags), so its
/// `Cargo.lock` goes stale when a crate it builds gains a dependency; CI builds it `--locked`.
fn check_fuzz_lock(layout: &Layout) -> Result<()> {
    let manifest = layout.root.join(FUZZ_MANIFEST);
    if !manifest.is_file() {
        return Ok(());
    }
    let output = project::cargo()
        .args(["metadata", "--locked", "--offline", "--format-version", "1"])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .context("cannot run `cargo metadata`")?;
    if !output.status.success() {
        // cargo's own `help:` line suggests dropping `--locked`, which is not the fix here.
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr.lines().next().unwrap_or_default();
        if first.contains("no matching package") {
            bail!(
                "{FUZZ_MANIFEST} needs a crate that is not in cargo's cache: {first}\nrun `cargo \
                 xtask fetch` once while online (it fetches the fuzzer's dependencies --locked, \
                 and says so if the lock file is stale)"
            );
        }
        bail!(
            "{FUZZ_MANIFEST}'s lock file is not up to date: {first}\nrun `cargo update \
             --workspace --offline --manifest-path {FUZZ_MANIFEST}` to update it"
        );
    }
    eprintln!("ok: {FUZZ_MANIFEST} builds --locked");
    Ok(())
}

pub const FUZZ_MANIFEST: &str = "crates/fuzz/Cargo.toml";

/// Fails, naming what differs and the command that fixes it, unless every generated folder of
/// `layout` holds the tree that `published` and the patches give.
pub fn check_generated(layout: &Layout, published: &[Published]) -> Result<()> {
    let patches = series::load(&layout.patches())?;
    for patch in &patches {
        patch.message()?;
    }
    let builds_on = branches::builds_on(&layout.patches())?;
    let scratch = Scratch::new()?;
    let generated = expected::generated_for(published);
    let expected = expected::expected_trees(&scratch, published, &patches, &builds_on, &generated)?;
    let label = |name: &str| {
        published
            .iter()
            .find(|p| p.pin.name == name)
            .map_or(name.to_string(), |p| p.pin.label())
    };
    let mut problems = Vec::new();
    for (generated, expected) in generated.iter().zip(expected) {
        let dir = layout.root.join(&generated.dir);
        if !dir.is_dir() {
            problems.push(format!("{} is missing", generated.dir));
            continue;
        }
        let actual = scratch.tree_of_dir(&dir)?;
        let what = match &generated.source {
            Source::Part {
                krate,
                applied: Applied::None,
                ..
            } => format!("{} as published", label(krate)),
            Source::Part {
                krate,
                applied: Applied::All,
                ..
            } => format!("{} + patches/", label(krate)),
            Source::Points => format!(
                "the points of {} and patches/stack.toml",
                published
                    .iter()
                    .map(|p| p.pin.label())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        if actual == expected {
            eprintln!("ok: {} is {what} (tree {actual})", generated.dir);
            continue;
        }
        let mut changes = scratch.changes(expected, actual)?;
        if changes.len() > 20 {
            let more = changes.len() - 20;
            changes.truncate(20);
            changes.push(format!("and {more} more"));
        }
        problems.push(format!(
            "{} differs from {what}:\n    {}",
            generated.dir,
            changes.join("\n    ")
        ));
    }
    if !problems.is_empty() {
        bail!(
            "{}\nrun `cargo xtask vendor` to regenerate them; a change made there by hand \
             belongs in a patch (README: \"After review comments\")",
            problems.join("\n")
        );
    }
    Ok(())
}
