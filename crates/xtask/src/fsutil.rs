//! Writing generated folders without losing anything: build beside the target, then swap whole.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// A new folder inside `parent`, removed when dropped: `.xtask-<label>-` and a random name, so
/// that it sits on the target's file system and a rename can move it into place.
pub(crate) fn temp_in(parent: &Path, label: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!(".xtask-{label}-"))
        .tempdir_in(parent)
        .with_context(|| format!("cannot create a folder in {}", parent.display()))
}

/// Replaces each `(new, target)`'s target folder with the folder `new`, which must be on the
/// same file system. Every target is moved aside first; if a move fails, the ones already
/// made are undone, so the targets end up all new or all as they were.
pub(crate) fn swap_in(pairs: &[(PathBuf, PathBuf)]) -> Result<()> {
    let mut moved: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
    let result = (|| -> Result<()> {
        for (new, target) in pairs {
            let aside = target.with_file_name(format!(
                ".{}.xtask-old",
                target.file_name().unwrap_or_default().to_string_lossy()
            ));
            if aside.exists() {
                std::fs::remove_dir_all(&aside)?;
            }
            let old = if target.exists() {
                std::fs::rename(target, &aside)
                    .with_context(|| format!("cannot move {} aside", target.display()))?;
                Some(aside)
            } else {
                None
            };
            moved.push((target.clone(), old));
            std::fs::rename(new, target)
                .with_context(|| format!("cannot move {} into place", target.display()))?;
        }
        Ok(())
    })();
    if let Err(err) = result {
        for (target, old) in moved.into_iter().rev() {
            let _ = std::fs::remove_dir_all(&target);
            if let Some(old) = old {
                let _ = std::fs::rename(old, &target);
            }
        }
        return Err(err);
    }
    for old in moved.into_iter().filter_map(|(_, old)| old) {
        std::fs::remove_dir_all(old)?;
    }
    Ok(())
}
