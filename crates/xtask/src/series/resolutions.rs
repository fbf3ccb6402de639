//! Resolutions carried for another base. Where an upstream pull request that rewrites the code
//! the patches change (`[base."N"]` in `patches/stack.toml`) is in a clone's base, some patches
//! conflict with it or no longer fix their bug there. `patches/on-N/` holds such a patch as it
//! goes onto a base that has the pull request, under the patch's own file name, and `pr` takes
//! it in place of the patch on such a base, as `git rerere` replays a resolution. The folder may
//! also hold a patch's notes for such a base (`<patch>.md`), which `pr` reads in place of its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use fs_err as fs;
use git2::{Oid, Repository};

use crate::apply::Outcome;
use crate::series::notes::{self, Notes};
use crate::series::stack_file::{Rewrite, StackFile};
use crate::series::Patch;

/// The folder of the resolutions for `[base."<name>"]`.
pub fn dir(patches_dir: &Path, name: &str) -> PathBuf {
    patches_dir.join(format!("on-{name}"))
}

/// How a summary names a base's pull request: `#3496` for a number, else its name.
pub fn shown(name: &str) -> String {
    match name.bytes().all(|b| b.is_ascii_digit()) {
        true => format!("#{name}"),
        false => name.to_string(),
    }
}

/// One `[base."<name>"]` with the resolutions of its folder.
#[derive(Clone, Debug)]
pub struct Resolutions {
    pub name: String,
    pub rewrite: Rewrite,
    /// Each stands for the patch in `patches/` with its file name.
    pub patches: Vec<Patch>,
    /// The notes of a patch on such a base, by the patch's file name.
    pub notes: BTreeMap<String, Notes>,
}

impl Resolutions {
    /// The resolution of `patch`, if this folder holds one.
    pub fn of(&self, patch: &Patch) -> Option<&Patch> {
        self.patches.iter().find(|r| r.file_name == patch.file_name)
    }
}

/// Every `[base]` of `stack_file` with its resolutions, read from `patches_dir`. Fails, naming
/// it, on a folder `on-*` that no `[base]` names, on a file there whose name is no patch's of
/// `patches`, and on a resolution whose message git cannot read.
pub(crate) fn load(
    patches_dir: &Path,
    stack_file: &StackFile,
    patches: &[Patch],
) -> Result<Vec<Resolutions>> {
    for name in crate::fsutil::names(patches_dir)? {
        if let Some(base) = name.strip_prefix("on-") {
            if !stack_file.rewrites.contains_key(base) {
                bail!(
                    "patches/{name}/ holds resolutions for a base that patches/stack.toml does not \
                     name: add [base.\"{base}\"] there (why, path, holds), or remove the folder"
                );
            }
        }
    }
    let mut all = Vec::new();
    for (name, rewrite) in &stack_file.rewrites {
        let folder = dir(patches_dir, name);
        let (mut resolutions, mut notes) = (Vec::new(), BTreeMap::new());
        if folder.is_dir() {
            for file_name in crate::fsutil::names(&folder)? {
                let shown = format!("patches/on-{name}/{file_name}");
                // The notes of a patch on such a base, which `pr` reads in place of its own.
                if file_name.ends_with(".md") {
                    let of = |p: &&Patch| notes::file_name(&p.file_name) == file_name;
                    let Some(patch) = patches.iter().find(of) else {
                        bail!(
                            "{shown} belongs to no patch: notes take the name of their patch, \
                             with .md"
                        );
                    };
                    let text = fs::read_to_string(folder.join(&file_name))?;
                    let parsed = notes::parse(&text).with_context(|| shown.clone())?;
                    notes.insert(patch.file_name.clone(), parsed);
                    continue;
                }
                if !patches.iter().any(|p| p.file_name == file_name) {
                    bail!(
                        "{shown} is not the file name of a patch in patches/: a resolution takes \
                         the name of the patch it stands for"
                    );
                }
                let bytes = fs::read(folder.join(&file_name))?;
                let patch = Patch::new(file_name, bytes).with_context(|| shown.clone())?;
                patch.diff().with_context(|| shown.clone())?;
                resolutions.push(patch);
            }
        }
        all.push(Resolutions {
            name: name.clone(),
            rewrite: rewrite.clone(),
            patches: resolutions,
            notes,
        });
    }
    Ok(all)
}

/// The bases' pull requests that the tree `tree` has, with their resolutions: a tree has one
/// when its file `path` holds `holds`.
pub fn in_tree(repo: &Repository, tree: Oid, all: &[Resolutions]) -> Result<Vec<Resolutions>> {
    let tree = repo.find_tree(tree)?;
    let has = |resolutions: &&Resolutions| {
        let rewrite = &resolutions.rewrite;
        let entry = tree.get_path(Path::new(&rewrite.path));
        let blob = entry.ok().and_then(|entry| repo.find_blob(entry.id()).ok());
        let holds = rewrite.holds.as_bytes();
        blob.is_some_and(|blob| blob.content().windows(holds.len()).any(|w| w == holds))
    };
    Ok(all.iter().filter(has).cloned().collect())
}

/// The blobs that each resolution of `found` gives on the base's tree `tree`, which it was made
/// on: what a three-way merge of a resolution needs where the patches before it moved its lines,
/// since the clone has the blobs it starts from but not the ones it makes.
pub fn blobs_on(repo: &Repository, tree: Oid, found: &[Resolutions]) -> Result<Vec<Oid>> {
    let mut blobs = Vec::new();
    for patch in found.iter().flat_map(|r| &r.patches) {
        // One that does not apply as written goes through the usual three-way path and its error.
        let Outcome::Applied { tree: after, .. } = crate::apply::as_written(repo, tree, patch)?
        else {
            continue;
        };
        blobs.extend(crate::apply::change_blobs(repo, tree, after)?);
    }
    Ok(blobs)
}

/// Writes `bytes` into the resolution `file_name` of `[base."<name>"]`, whole or not at all.
pub fn write(patches_dir: &Path, name: &str, file_name: &str, bytes: &[u8]) -> Result<()> {
    crate::fsutil::write_whole(&dir(patches_dir, name).join(file_name), bytes)
}
