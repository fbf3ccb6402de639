//! `patches/` written again whole, by `format-patch` and `vendor --version`: built aside and
//! swapped in, and never over changes that are not committed.

use std::collections::BTreeMap;

use anyhow::{ensure, Context, Result};
use fs_err as fs;
use git2::Repository;

use crate::branches::Retired;
use crate::fsutil::{read_if_exists, swap_in, temp_in};
use crate::git;
use crate::pr::notes;
use crate::project::Layout;
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
pub(crate) fn rewrite(
    layout: &Layout,
    series: &[(Option<&Patch>, Option<&Patch>)],
    retired: &Retired,
) -> Result<()> {
    let dir = layout.patches();
    let temp = temp_in(&layout.root, "patches")?;
    let new = temp.path().join("patches");
    fs::create_dir(&new)?;
    let (mut renamed, mut resolutions) = (BTreeMap::new(), BTreeMap::new());
    let mut retiring = Vec::new();
    for &(old, patch) in series {
        match (old, patch) {
            (old, Some(patch)) => {
                fs::write(new.join(&patch.file_name), &patch.bytes)?;
                if let Some(old) = old {
                    let notes = notes::file_name(&old.file_name);
                    renamed.insert(notes, notes::file_name(&patch.file_name));
                    resolutions.insert(old.file_name.clone(), patch.file_name.clone());
                }
            }
            (Some(old), None) => {
                let why = format!("{}: {}", retired.why, old.message()?.subject);
                let retired = Retired {
                    why,
                    ..retired.clone()
                };
                retiring.push((old, retired));
            }
            (None, None) => {}
        }
    }
    let listing = fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()));
    for entry in listing? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let gone = retiring
            .iter()
            .any(|(p, _)| notes::file_name(&p.file_name) == name);
        if name.starts_with("on-") && dir.join(&name).is_dir() {
            // A resolution keeps the file name of its patch, and leaves with it.
            fs::create_dir(new.join(&name))?;
            for entry in fs::read_dir(dir.join(&name))? {
                let file = entry?.file_name().to_string_lossy().into_owned();
                if retiring.iter().any(|(p, _)| p.file_name == file) {
                    continue;
                }
                let target = resolutions.get(&file).unwrap_or(&file);
                fs::copy(dir.join(&name).join(&file), new.join(&name).join(target))?;
            }
        } else if !name.ends_with(".patch") && !gone {
            let target = renamed.get(&name).unwrap_or(&name);
            fs::copy(dir.join(&name), new.join(target))?;
        }
    }
    if !retiring.is_empty() {
        let stack = read_if_exists(&dir.join("stack.toml"))?.unwrap_or_default();
        fs::write(
            new.join("stack.toml"),
            crate::branches::retire(&stack, &retiring)?,
        )?;
    }
    swap_in(&[(new, dir)])
}
