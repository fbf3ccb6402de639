//! A branch that `pr` made from a resolution (`patches/on-<name>/`) written back into it.
//!
//! A resolution is written against a base that has the other pull request, so it is not rebuilt
//! on the published crates as a patch is: it is the branch's own change, from the commit `pr`
//! built the branch on to its tip, as `git format-patch` writes that change.

use std::path::Path;

use anyhow::{Context, Result};
use git2::Repository;

use super::{Became, PatchBecame, Slot, WroteBack};
use crate::series;
use crate::series::resolutions::{self, Resolutions};

/// Writes the branch's change, the one slot with commits, into its resolution for `[base.name]`
/// in `patches_dir`, leaving every other file as it is. Returns what became of it, and what to
/// run next.
pub(super) fn write_back(
    patches_dir: &Path,
    for_rewrites: &[Resolutions],
    clone: &Repository,
    name: &str,
    slots: &[Slot],
) -> Result<WroteBack> {
    let found = slots.iter().find_map(|slot| match slot {
        Slot::From {
            old: Some(old),
            source,
            ..
        } => Some((old, source)),
        _ => None,
    });
    let (patch, source) = found.context("a branch of one patch without its commits")?;
    let shown = format!("patches/on-{name}/{}", patch.file_name);
    let old = for_rewrites.iter().find(|r| r.name == name);
    let old = old.and_then(|r| r.of(patch)).map(|r| r.bytes.clone());
    let old = old.with_context(|| {
        format!("the branch was made from {shown}, which is gone: run pr again")
    })?;
    let (onto, tip, message) = source.change(clone)?;
    // The two commits `email_of` makes go to memory, never into the clone.
    let odb = clone.odb()?;
    let memory = odb.add_new_mempack_backend(1000)?;
    let bytes = series::email_of(clone, onto, tip, &message);
    memory.reset()?;
    let bytes = bytes?;
    let became = match bytes == old {
        true => Became::Unchanged,
        false => {
            resolutions::write(patches_dir, name, &patch.file_name, &bytes)?;
            let (from, commits) = (source.shown(clone)?, source.commits.len());
            Became::Written {
                from,
                commits,
                new: false,
            }
        }
    };
    Ok(WroteBack {
        patches: vec![PatchBecame {
            number: shown.clone(),
            file_name: shown,
            became,
        }],
        next: "`cargo xtask check`",
    })
}
