//! The series moved onto another release of the published crates, for `vendor --version`: a
//! patch the release holds already retires, a patch whose context moved is merged three ways
//! and written again, and the others keep their bytes.

use anyhow::{Context, Result};

use crate::expected::published_tree;
use crate::fsutil::{swap_in, temp_in};
use crate::pin;
use crate::pr::notes;
use crate::project::Layout;
use crate::published::Published;
use crate::series::{self, Applied, Patch};
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
    let patches = series::load(&dir)?;
    let scratch = Scratch::new()?;
    let repo = &scratch.repo;
    let known = series::blobs(repo, published_tree(repo, old)?, &patches)?;
    let mut tree = published_tree(repo, new)?;
    let mut moved = Vec::new();
    let label = pin::label(&new.iter().map(|p| p.pin.clone()).collect::<Vec<_>>());
    for patch in &patches {
        let applied = series::apply_three_way(repo, tree, patch, &known)
            .with_context(|| format!("moving the series to {label}"))?;
        let after = applied.tree(tree);
        let outcome = match applied {
            Applied::AlreadyThere => Moved::Released,
            Applied::AsWritten(_)
                if series::check_index_lines(repo, tree, after, patch).is_ok() =>
            {
                Moved::Unchanged
            }
            _ => Moved::Rewritten,
        };
        let bytes = match outcome {
            Moved::Rewritten => series::email_of(repo, tree, after, &patch.message()?)?,
            _ => patch.bytes.clone(),
        };
        let file_name = patch.file_name.clone();
        moved.push((Patch { file_name, bytes }, outcome));
        tree = after;
    }
    if moved
        .iter()
        .all(|(_, outcome)| *outcome == Moved::Unchanged)
    {
        return Ok(moved);
    }
    crate::format_patch::refuse_uncommitted_patches(layout)?;
    let version = &new[0].pin.version;
    let temp = temp_in(&layout.root, "rebase")?;
    let folder = temp.path().join("patches");
    std::fs::create_dir(&folder)?;
    let released: Vec<&Patch> = moved
        .iter()
        .filter(|(_, outcome)| *outcome == Moved::Released)
        .map(|(patch, _)| patch)
        .collect();
    for (patch, outcome) in &moved {
        if *outcome != Moved::Released {
            std::fs::write(folder.join(&patch.file_name), &patch.bytes)?;
        }
    }
    let listing = std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()));
    for entry in listing? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let gone = released
            .iter()
            .any(|p| notes::file_name(&p.file_name) == name);
        if !name.ends_with(".patch") && !gone && name != "stack.toml" {
            std::fs::copy(dir.join(&name), folder.join(&name))?;
        }
    }
    let stack = crate::fsutil::read_if_exists(&dir.join("stack.toml"))?.unwrap_or_default();
    let mut retiring = Vec::new();
    for patch in &released {
        let subject = patch.message()?.subject;
        let retired = crate::branches::Retired {
            why: format!("released in {label}: {subject}"),
            version: Some(version.clone()),
            ..Default::default()
        };
        retiring.push((patch.number().to_string(), retired));
    }
    let stack = crate::branches::retire(&stack, &retiring)?;
    std::fs::write(folder.join("stack.toml"), stack)?;
    swap_in(&[(folder, dir)])?;
    Ok(moved)
}
