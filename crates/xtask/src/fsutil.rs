//! Reading folders, and writing generated ones without losing anything: build beside the
//! target, then swap whole.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use fs_err as fs;

/// A new folder `.xtask-<label>-…` in `parent` (made first if need be), removed when dropped,
/// that a rename can move.
pub(crate) fn temp_in(parent: &Path, label: &str) -> Result<tempfile::TempDir> {
    fs::create_dir_all(parent)?;
    let prefix = format!(".xtask-{label}-");
    let temp = tempfile::Builder::new().prefix(&prefix).tempdir_in(parent);
    temp.with_context(|| format!("cannot create a folder in {}", parent.display()))
}

/// Writes `bytes` to `path` whole or not at all: into a file beside it, then renamed over it.
/// The file keeps its permissions, and a new one gets a plain file's (a temporary file's are
/// the owner's alone).
pub(crate) fn write_whole(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    let folder = path.parent().context("a file with no folder")?;
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    let plain = std::os::unix::fs::PermissionsExt::from_mode(0o644);
    #[cfg(not(unix))]
    let plain = fs::metadata(folder)?.permissions();
    let permissions = fs::metadata(path).map_or(plain, |m| m.permissions());
    let temp = builder.permissions(permissions).tempfile_in(folder);
    let temp = temp.with_context(|| format!("cannot create a file in {}", folder.display()))?;
    fs::write(temp.path(), bytes)?;
    temp.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The text of `path`, or `None` where there is no such file.
pub(crate) fn read_if_exists(path: &Path) -> Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// The names of the entries of the folder `dir` (`patches/` or one of its folders), sorted.
pub(crate) fn names(dir: &Path) -> Result<Vec<String>> {
    let listing = fs::read_dir(dir)?;
    let names = listing.map(|entry| Ok(entry?.file_name().to_string_lossy().into_owned()));
    let mut names = names.collect::<Result<Vec<_>>>()?;
    names.sort();
    Ok(names)
}

/// Moves each `(new, target)` into place, all or nothing: targets go aside, and back on failure.
pub(crate) fn swap_in(pairs: &[(PathBuf, PathBuf)]) -> Result<()> {
    let mut moved = Vec::new();
    let result = pairs.iter().try_for_each(|(new, target)| -> Result<()> {
        let name = target.file_name().unwrap_or_default().to_string_lossy();
        let old = target.with_file_name(format!(".{name}.xtask-old"));
        if old.exists() {
            fs::remove_dir_all(&old)?;
        }
        if target.exists() {
            fs::rename(target, &old)
                .with_context(|| format!("cannot move {} aside", target.display()))?;
        }
        moved.push((target, old));
        fs::rename(new, target)
            .with_context(|| format!("cannot move {} into place", target.display()))
    });
    for (target, old) in moved.into_iter().rev() {
        if result.is_err() {
            let _ = fs::remove_dir_all(target);
            let _ = fs::rename(old, target);
        } else if old.exists() {
            fs::remove_dir_all(old)?;
        }
    }
    result
}
