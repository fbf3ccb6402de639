//! `cargo xtask vendor [--version X]`: regenerates the vendored crate and the unpatched
//! `generation` module from the published crate and `patches/`.

use anyhow::{Context, Result};

use crate::fsutil::{swap_in, TempDir};
use crate::generate;
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
        std::fs::write(layout.pin(), published.pin.render())?;
        eprintln!(
            "pinned {} (sha256 {}, commit {}); now set the candle versions in Cargo.toml's \
             [workspace.dependencies] to {}",
            published.pin.label(),
            published.pin.sha256,
            published.pin.commit,
            published.pin.version
        );
    }
    Ok(())
}

/// Writes every generated folder of `layout` from `published` and the patches. Everything is
/// built in temporary folders first; a patch that does not apply leaves the workspace as it was.
pub fn vendor(layout: &Layout, published: &published::Published) -> Result<()> {
    let patches = series::load(&layout.patches())?;
    let scratch = Scratch::new()?;
    let trees = generate::expected_trees(&scratch, published, &patches, &layout.generated)?;
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
