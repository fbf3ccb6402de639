//! Git trees for whole folders, so that "is this folder exactly that?" is one comparison of ids.

#[cfg(unix)]
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use fs_err as fs;
use git2::FileMode::{self, Blob, BlobExecutable};
use git2::{ObjectType, Oid, Repository};

use crate::published::CrateFile;

/// An in-memory repository: hashing and patching write nothing to disk.
pub fn scratch() -> Result<Repository> {
    let odb = git2::Odb::new()?;
    odb.add_new_mempack_backend(1)?;
    Ok(Repository::from_odb(odb)?)
}

/// The tree of the folder `dir` as it is on disk, in `repo`; git keeps no empty folder.
pub fn tree_of_dir(repo: &Repository, dir: &Path) -> Result<Oid> {
    let mut builder = repo.treebuilder(None)?;
    let entries = fs::read_dir(dir)?;
    for entry in entries {
        let (name, path) = entry.map(|e| (e.file_name(), e.path()))?;
        let Some(name) = name.to_str() else {
            bail!("{}: the name is not UTF-8", path.display());
        };
        let kind = fs::symlink_metadata(&path)?;
        if kind.is_dir() {
            let tree = tree_of_dir(repo, &path)?;
            if !repo.find_tree(tree)?.is_empty() {
                builder.insert(name, tree, FileMode::Tree.into())?;
            }
        } else if kind.is_file() {
            #[cfg(unix)]
            let executable = kind.permissions().mode() & 0o111 != 0;
            #[cfg(not(unix))]
            let executable = false;
            let mode = if executable { BlobExecutable } else { Blob };
            builder.insert(name, repo.blob_path(&path)?, mode.into())?;
        } else {
            bail!("{}: not a plain file or folder", path.display());
        }
    }
    Ok(builder.write()?)
}

/// What differs from `from` to `to` in `repo`, one "status path" line each.
pub fn differences(repo: &Repository, from: Oid, to: Oid) -> Result<Vec<String>> {
    let diff = crate::git::diff_trees(repo, from, to)?;
    let changes = diff.deltas().map(|delta| {
        let path = crate::git::path(&delta);
        let status = match delta.status() {
            git2::Delta::Added => "added",
            git2::Delta::Deleted => "deleted",
            git2::Delta::Typechange => "changed type",
            _ => "modified",
        };
        format!("{status} {}", path.unwrap_or(Path::new("?")).display())
    });
    Ok(changes.collect())
}

/// Writes `tree` of `repo` into the new folder `dir`, with the modes, and links as links (unix).
pub fn write_tree(repo: &Repository, tree: Oid, dir: &Path) -> Result<()> {
    fs::create_dir(dir)?;
    for item in repo.find_tree(tree)?.iter() {
        let Ok(name) = item.name() else {
            bail!("{}: a name in the tree is not UTF-8", dir.display());
        };
        let path = dir.join(name);
        match item.kind() {
            Some(ObjectType::Tree) => write_tree(repo, item.id(), &path)?,
            Some(ObjectType::Blob) => write_blob(repo, item.id(), item.filemode(), &path)?,
            _ => bail!("cannot write {}: unexpected entry", path.display()),
        }
    }
    Ok(())
}

/// Writes blob `id` at `path` as a file with `mode`, or as a link.
pub(crate) fn write_blob(repo: &Repository, id: Oid, mode: i32, path: &Path) -> Result<()> {
    let write = || -> Result<()> {
        let blob = repo.find_blob(id)?;
        if mode == i32::from(FileMode::Link) {
            #[cfg(unix)]
            {
                let target =
                    std::str::from_utf8(blob.content()).context("a link to a non-UTF-8 path")?;
                return Ok(fs::os::unix::fs::symlink(target, path)?);
            }
            #[cfg(not(unix))]
            bail!("symbolic links are written on unix only");
        }
        fs::write(path, blob.content())?;
        #[cfg(unix)]
        if mode == i32::from(BlobExecutable) {
            fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(())
    };
    write().with_context(|| format!("cannot write {}", path.display()))
}

/// The tree of several crates' `files` in `repo`, each crate under its own folder.
pub fn tree_of_crates(repo: &Repository, crates: &[(&str, &[CrateFile])]) -> Result<Oid> {
    let mut update = git2::build::TreeUpdateBuilder::new();
    for (prefix, files) in crates {
        for file in files.iter() {
            let (path, executable) = (format!("{prefix}/{}", file.path), file.executable);
            let mode = if executable { BlobExecutable } else { Blob };
            let (path, blob) = (path.trim_start_matches('/'), repo.blob(&file.data)?);
            update.upsert(path, blob, mode);
        }
    }
    // An empty tree builder writes the empty tree, which the updates start from.
    let empty = repo.find_tree(repo.treebuilder(None)?.write()?)?;
    Ok(update.create_updated(repo, &empty)?)
}
