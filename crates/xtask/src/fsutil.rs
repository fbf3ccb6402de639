//! Writing generated folders without losing anything: build beside the target, then swap whole.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// A folder removed when dropped.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// A new folder in the system's temporary folder.
    pub fn new(label: &str) -> Result<TempDir> {
        TempDir::in_dir(&std::env::temp_dir(), label)
    }

    /// A new folder inside `parent`.
    pub fn in_dir(parent: &Path, label: &str) -> Result<TempDir> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            ".xtask-{label}-{}-{}-{nanos}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        let path = parent.join(name);
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(TempDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Replaces each `(new, target)`'s target folder with the folder `new`, which must be on the
/// same file system. Every target is moved aside first; if a move fails, the ones already
/// made are undone, so the targets end up all new or all as they were.
pub fn swap_in(pairs: &[(PathBuf, PathBuf)]) -> Result<()> {
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
    match result {
        Ok(()) => {
            for (_, old) in moved {
                if let Some(old) = old {
                    std::fs::remove_dir_all(old)?;
                }
            }
            Ok(())
        }
        Err(err) => {
            for (target, old) in moved.into_iter().rev() {
                let _ = std::fs::remove_dir_all(&target);
                if let Some(old) = old {
                    let _ = std::fs::rename(old, &target);
                }
            }
            Err(err)
        }
    }
}
