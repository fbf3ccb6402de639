//! The series moved onto another release of the published crates, for `vendor --version`: a
//! patch the release holds already retires, a patch whose context moved is merged three ways
//! and written again, and the others keep their bytes.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::apply;
use crate::expected::published_tree;
use crate::patches_dir;
use crate::pin;
use crate::project::Layout;
use crate::published::Published;
use crate::series;
use crate::series::stack_file::Retired;

/// What a move to another release did to a patch whose bytes it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moved {
    /// Merged three ways onto the release, and written again.
    Rewritten,
    /// The release holds it: it retires.
    Retired,
}

/// What `rebase` gives: each patch whose bytes changed, by file name, and `patches/` written
/// again aside, where any did.
#[derive(Default)]
pub struct Rebased {
    pub moved: Vec<(String, Moved)>,
    pub aside: Option<(tempfile::TempDir, PathBuf)>,
}

/// Moves `patches/` from the crates `old` to the crates `new`. Returns the patches whose bytes
/// changed, in series order, and, only if there are any, the folder written again aside
/// (`patches_dir::aside`).
pub fn rebase(layout: &Layout, old: &[Published], new: &[Published]) -> Result<Rebased> {
    let dir = layout.patches();
    let patches = series::Series::load(&dir)?.patches;
    let repo = &crate::trees::scratch()?;
    let known = apply::blobs(repo, published_tree(repo, old)?, &patches)?;
    let mut tree = published_tree(repo, new)?;
    let mut moved = Vec::new();
    let label = pin::label(&new.iter().map(|p| p.pin.clone()).collect::<Vec<_>>());
    for patch in &patches {
        let onto = apply::move_onto(repo, tree, patch, &known)
            .with_context(|| format!("moving the series to {label}"))?;
        tree = onto.as_ref().map_or(tree, |(after, _)| *after);
        moved.push((patch.clone(), onto.map(|(_, moved)| moved)));
    }
    let changed = moved
        .iter()
        .filter(|(old, new)| new.as_ref().map(|p| &p.bytes) != Some(&old.bytes));
    let moved_as = |new: &Option<_>| match new {
        Some(_) => Moved::Rewritten,
        None => Moved::Retired,
    };
    let changed: Vec<(String, Moved)> = changed
        .map(|(old, new)| (old.file_name.clone(), moved_as(new)))
        .collect();
    if changed.is_empty() {
        return Ok(Rebased::default());
    }
    patches_dir::refuse_uncommitted(layout)?;
    let series: Vec<_> = (moved.iter())
        .map(|(old, new)| (Some(old), new.as_ref()))
        .collect();
    let retired = Retired {
        why: format!("released in {label}"),
        version: Some(new[0].pin.version.clone()),
        ..Retired::default()
    };
    let aside = Some(patches_dir::aside(layout, &series, &retired)?);
    Ok(Rebased {
        moved: changed,
        aside,
    })
}
