//! `patches/` written again whole, by `format-patch` and `vendor --version`: built aside and
//! swapped in, and never over changes that are not committed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use fs_err as fs;
use git2::Repository;

use crate::fsutil::{names, read_if_exists, swap_in, temp_in};
use crate::git;
use crate::project::Layout;
use crate::series::notes;
use crate::series::stack_file::Retired;
use crate::series::Patch;

/// `patches/` is rewritten whole: refuse while it holds changes that are not committed.
pub(crate) fn refuse_uncommitted(layout: &Layout) -> Result<()> {
    let root = layout.root.display();
    let workspace = Repository::discover(&layout.root).with_context(|| {
        format!("{root} is not in a git repository: patches/ would be overwritten with no way back")
    })?;
    let workdir = workspace.workdir();
    let workdir = workdir.context("the workspace's repository is bare")?;
    let patches = layout.patches();
    let relative = patches.strip_prefix(workdir.canonicalize()?);
    let relative = relative.or_else(|_| patches.strip_prefix(workdir))?;
    let changed = git::uncommitted(&workspace, Some(&format!("{}/", relative.display())))?;
    ensure!(
        changed.is_empty(),
        "patches/ has changes that are not committed ({}): commit or stash them first, since \
         it is written again whole",
        changed.join(", ")
    );
    Ok(())
}

/// Writes `patches/` again from `series`, each entry an old patch, the new patch that takes its
/// place, or both. A new patch takes the old one's notes and resolutions (`on-*/`) under its own
/// name. An old patch with no new one retires: its notes and resolutions go, and its number goes
/// to `[retired]` in `stack.toml` as `retired` says, with the patch's subject after its `why`.
/// Everything else in the folder stays.
pub(crate) fn replace(
    layout: &Layout,
    series: &[(Option<&Patch>, Option<&Patch>)],
    retired: &Retired,
) -> Result<()> {
    let (_temp, new) = aside(layout, series, retired)?;
    swap_in(&[(new, layout.patches())])
}

/// `patches/` as `replace` writes it, in a folder aside (which goes when the first value drops):
/// for a caller that swaps it in with other folders.
pub(crate) fn aside(
    layout: &Layout,
    series: &[(Option<&Patch>, Option<&Patch>)],
    retired: &Retired,
) -> Result<(tempfile::TempDir, PathBuf)> {
    let dir = layout.patches();
    let temp = temp_in(&layout.root, "patches")?;
    let new = temp.path().join("patches");
    fs::create_dir(&new)?;
    // Where the notes and resolutions of each old patch go: to the new patch's name, or nowhere
    // (`None`) when it retires. A resolution keeps the file name of its patch.
    let (mut moved, mut retiring) = (BTreeMap::new(), Vec::new());
    for &(old, patch) in series {
        if let Some(patch) = patch {
            fs::write(new.join(&patch.file_name), &patch.bytes)?;
        }
        let Some(old) = old else { continue };
        let name = patch.map(|p| p.file_name.as_str());
        moved.insert(old.file_name.clone(), name.map(str::to_string));
        moved.insert(notes::file_name(&old.file_name), name.map(notes::file_name));
        if patch.is_none() {
            let mut its = retired.clone();
            its.why = format!("{}: {}", retired.why, old.message.subject);
            retiring.push((old, its));
        }
    }
    let copy = |from: &Path, to: &Path, name: String| -> Result<()> {
        let target = match moved.get(&name) {
            Some(None) => return Ok(()),
            Some(Some(target)) => target,
            None => &name,
        };
        fs::copy(from.join(&name), to.join(target))?;
        Ok(())
    };
    for name in names(&dir)? {
        let folder = dir.join(&name);
        if name.starts_with("on-") && folder.is_dir() {
            fs::create_dir(new.join(&name))?;
            for file in names(&folder)? {
                copy(&folder, &new.join(&name), file)?;
            }
        } else if !name.ends_with(".patch") {
            copy(&dir, &new, name)?;
        }
    }
    if !retiring.is_empty() {
        let stack = read_if_exists(&dir.join("stack.toml"))?.unwrap_or_default();
        let stack = crate::series::stack_file::retire(&stack, &retiring)?;
        fs::write(new.join("stack.toml"), stack)?;
    }
    Ok((temp, new))
}
