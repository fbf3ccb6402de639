//! `cargo xtask vendor [--version X]`: regenerates the vendored crate and the unpatched
//! `generation` module from the published crate and `patches/`.

use anyhow::{Context, Result};

use crate::expected;
use crate::fsutil::{swap_in, TempDir};
use crate::pin::Pin;
use crate::project::Layout;
use crate::published;
use crate::series;
use crate::trees::Scratch;

pub fn run(layout: &Layout, version: Option<&str>) -> Result<()> {
    let pinned = Pin::read(&layout.pin())?;
    let published = match version {
        Some(version) if version != pinned.version => {
            let archive = match published::find_cached(&pinned.name, version) {
                Some(archive) => archive,
                None => published::fetch(layout, &pinned.name, version)?,
            };
            published::read_archive(&archive, &pinned.name, version)?
        }
        _ => published::load_or_fetch(layout, &pinned)?,
    };
    vendor(layout, &published)?;
    if published.pin != pinned {
        repin(layout, &pinned, &published.pin)?;
        eprintln!(
            "pinned {} (sha256 {}, commit {}) and set candle's versions in Cargo.toml; run \
             `cargo update -p candle-transformers` to update Cargo.lock, then `cargo test`",
            published.pin.label(),
            published.pin.sha256,
            published.pin.commit,
        );
    }
    Ok(())
}

/// The candle crates whose version `[workspace.dependencies]` sets to the pin's: the pinned
/// crate and the ones published with it, which must be of the same release.
const CANDLE_CRATES: [&str; 3] = ["candle-core", "candle-nn", "candle-transformers"];

/// Writes `new` to the pin file and moves `Cargo.toml`'s candle versions from `old`'s to
/// `new`'s. Fails, writing nothing, if `Cargo.toml` names no candle crate at the old version.
pub fn repin(layout: &Layout, old: &Pin, new: &Pin) -> Result<()> {
    let manifest = layout.root.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("cannot read {}", manifest.display()))?;
    let (updated, count) = set_versions(&text, &old.version, &new.version);
    if count == 0 {
        anyhow::bail!(
            "{} names no candle crate at version {}: set the versions by hand",
            layout.show(&manifest),
            old.version
        );
    }
    std::fs::write(layout.pin(), new.render())?;
    std::fs::write(&manifest, updated)?;
    Ok(())
}

/// `text` with the version of each candle crate in `[workspace.dependencies]` moved from `old`
/// to `new`, and how many lines changed.
pub fn set_versions(text: &str, old: &str, new: &str) -> (String, usize) {
    let mut in_dependencies = false;
    let mut count = 0;
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_dependencies = trimmed == "[workspace.dependencies]";
        }
        let names_candle = CANDLE_CRATES.iter().any(|name| {
            trimmed.starts_with(&format!("{name} ")) || trimmed.contains(&format!("\"{name}\""))
        });
        let quoted = format!("\"{old}\"");
        if in_dependencies && names_candle && line.contains(&quoted) {
            out += &line.replace(&quoted, &format!("\"{new}\""));
            count += 1;
        } else {
            out += line;
        }
    }
    (out, count)
}

/// Writes every generated folder of `layout` from `published` and the patches. Everything is
/// built in temporary folders first; a patch that does not apply leaves the workspace as it was.
pub fn vendor(layout: &Layout, published: &published::Published) -> Result<()> {
    let patches = series::load(&layout.patches())?;
    let scratch = Scratch::new()?;
    let trees = expected::expected_trees(&scratch, published, &patches, &layout.generated)?;
    // Each tree is written into a temporary folder beside its target (the same file system,
    // so that a rename moves it), then all of them are swapped in together.
    let mut temps = Vec::new();
    let mut pairs = Vec::new();
    for (generated, tree) in layout.generated.iter().zip(&trees) {
        let target = layout.root.join(generated.dir);
        let parent = target
            .parent()
            .context("a generated folder has no parent")?;
        std::fs::create_dir_all(parent)?;
        let temp = TempDir::in_dir(parent, "vendor")?;
        let new = temp.path().join("tree");
        scratch.write_tree(*tree, &new)?;
        pairs.push((new, target));
        temps.push(temp);
    }
    swap_in(&pairs)?;
    for (generated, tree) in layout.generated.iter().zip(&trees) {
        eprintln!("wrote {} (tree {tree})", generated.dir);
    }
    Ok(())
}
