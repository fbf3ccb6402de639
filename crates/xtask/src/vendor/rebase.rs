//! The series moved onto another release of the published crates, for `vendor --version`: a
//! patch the release holds already retires, a patch whose context moved is merged three ways
//! and written again, and the others keep their bytes.

use anyhow::{Context, Result};

use crate::apply::{self, Moved};
use crate::expected::published_tree;
use crate::patches_dir;
use crate::pin;
use crate::project::Layout;
use crate::published::Published;
use crate::series::stack_file::Retired;
use crate::series::{self, Patch};

/// Moves `patches/` from the crates `old` to the crates `new`, writing the folder again only if a
/// patch changed or retired. Returns each patch as it reads on `new`, and what became of it (one
/// the release holds already retires), in series order.
pub fn rebase(
    layout: &Layout,
    old: &[Published],
    new: &[Published],
) -> Result<Vec<(Patch, Moved)>> {
    let dir = layout.patches();
    let patches = series::Series::load(&dir)?.patches;
    let repo = &crate::trees::scratch()?;
    let known = apply::blobs(repo, published_tree(repo, old)?, &patches)?;
    let mut tree = published_tree(repo, new)?;
    let mut moved = Vec::new();
    let label = pin::label(&new.iter().map(|p| p.pin.clone()).collect::<Vec<_>>());
    for patch in &patches {
        let (after, patch, outcome) = apply::move_onto(repo, tree, patch, &known)
            .with_context(|| format!("moving the series to {label}"))?;
        moved.push((patch, outcome));
        tree = after;
    }
    if moved.iter().all(|(_, moved)| *moved == Moved::Unchanged) {
        return Ok(moved);
    }
    patches_dir::refuse_uncommitted(layout)?;
    let series: Vec<_> = (moved.iter())
        .map(|(patch, outcome)| {
            (
                Some(patch),
                (*outcome != Moved::AlreadyThere).then_some(patch),
            )
        })
        .collect();
    let retired = Retired {
        why: format!("released in {label}"),
        version: Some(new[0].pin.version.clone()),
        ..Retired::default()
    };
    patches_dir::replace(layout, &series, &retired)?;
    Ok(moved)
}
