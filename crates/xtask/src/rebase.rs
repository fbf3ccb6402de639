//! The series moved onto another release of the published crates, for `vendor --version`: a
//! patch the release holds already retires, a patch whose context moved is merged three ways
//! and written again, and the others keep their bytes.

use anyhow::{Context, Result};

use crate::expected::published_tree;
use crate::patches_dir;
use crate::pin;
use crate::project::Layout;
use crate::published::Published;
use crate::series::stack_file::Retired;
use crate::series::{self, Carried, Patch};
use crate::trees::Scratch;

/// What moving the series did to one patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Moved {
    Unchanged,
    /// Merged three ways, or its index lines named other blobs: written again.
    Rewritten,
    /// The release holds its change: it left the series.
    Released,
}

/// Moves `patches/` from the crates `old` to the crates `new`, writing the folder again only if a
/// patch changed or retired. Returns what happened to each patch, in series order.
pub fn rebase(
    layout: &Layout,
    old: &[Published],
    new: &[Published],
) -> Result<Vec<(Patch, Moved)>> {
    let dir = layout.patches();
    let patches = series::Series::load(&dir)?.patches;
    let scratch = Scratch::new()?;
    let repo = &scratch.repo;
    let known = series::blobs(repo, published_tree(repo, old)?, &patches)?;
    let mut tree = published_tree(repo, new)?;
    let mut moved = Vec::new();
    let label = pin::label(&new.iter().map(|p| p.pin.clone()).collect::<Vec<_>>());
    for patch in &patches {
        let (after, carried) = series::carry(repo, tree, patch, &known)
            .with_context(|| format!("moving the series to {label}"))?;
        let (bytes, outcome) = match carried {
            Carried::AlreadyThere => (patch.bytes.clone(), Moved::Released),
            Carried::Unchanged => (patch.bytes.clone(), Moved::Unchanged),
            Carried::Rewritten(bytes) => (bytes, Moved::Rewritten),
        };
        let file_name = patch.file_name.clone();
        moved.push((Patch { file_name, bytes }, outcome));
        tree = after;
    }
    if moved.iter().all(|(_, moved)| *moved == Moved::Unchanged) {
        return Ok(moved);
    }
    patches_dir::refuse_uncommitted(layout)?;
    let series: Vec<_> = (moved.iter())
        .map(|(patch, outcome)| (Some(patch), (*outcome != Moved::Released).then_some(patch)))
        .collect();
    let retired = Retired {
        why: format!("released in {label}"),
        version: Some(new[0].pin.version.clone()),
        ..Retired::default()
    };
    patches_dir::rewrite(layout, &series, &retired)?;
    Ok(moved)
}
