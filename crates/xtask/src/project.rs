//! Where things are in the workspace.

use std::path::{Path, PathBuf};

/// A folder that `cargo xtask vendor` writes and `cargo xtask check` compares: a folder of a
/// published crate, with `patches/` applied or as published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generated {
    /// Relative to the workspace root.
    pub dir: String,
    /// The pinned crate it comes from.
    pub krate: String,
    /// The folder of that crate it holds, `""` for the whole crate.
    pub crate_dir: &'static str,
    pub patched: bool,
}

/// Where a pinned crate is vendored, patched: what `[patch.crates-io]` points at.
pub fn vendored_dir(name: &str) -> String {
    format!("crates/{name}")
}

/// Folders made from a part of one pinned crate: the unpatched `generation` module that tests
/// and benches compare the patched crate with; the published tests, which the upstream crate
/// runs on that module and the `pr` tests build a candle-like repository from; and the patched
/// module again, built like the unpatched one, so that the benches compare the patches alone.
const PARTS: [(&str, &str, &str, bool); 3] = [
    (
        "candle-transformers",
        "crates/upstream/src/generation",
        "src/generation",
        false,
    ),
    (
        "candle-transformers",
        "crates/upstream/published-tests",
        "tests",
        false,
    ),
    (
        "candle-transformers",
        "crates/patched-copy/src/generation",
        "src/generation",
        true,
    ),
];

/// Every generated folder for the crates `pins` names: each crate whole and patched, then the
/// parts taken from them.
pub fn generated(names: &[&str]) -> Vec<Generated> {
    let mut all: Vec<Generated> = names
        .iter()
        .map(|name| Generated {
            dir: vendored_dir(name),
            krate: name.to_string(),
            crate_dir: "",
            patched: true,
        })
        .collect();
    for (krate, dir, crate_dir, patched) in PARTS {
        if names.contains(&krate) {
            all.push(Generated {
                dir: dir.to_string(),
                krate: krate.to_string(),
                crate_dir,
                patched,
            });
        }
    }
    all
}

/// The paths the commands work on; tests point one at a temporary workspace.
#[derive(Clone, Debug)]
pub struct Layout {
    pub root: PathBuf,
}

impl Layout {
    /// This workspace.
    pub fn workspace() -> Layout {
        Layout::at(shared::root())
    }

    pub fn at(root: PathBuf) -> Layout {
        Layout { root }
    }

    pub fn patches(&self) -> PathBuf {
        self.root.join("patches")
    }

    pub fn pin(&self) -> PathBuf {
        shared::pin::file(&self.root)
    }

    pub fn lockfile(&self) -> PathBuf {
        self.root.join("Cargo.lock")
    }

    /// Cargo's target folder, where the tools keep their scratch files and reports.
    pub fn target(&self) -> PathBuf {
        shared::target_dir_of(&self.root)
    }

    /// A path relative to the root, for messages.
    pub fn show(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }
}

/// The program that runs cargo: the one that started us, if any.
pub fn cargo() -> std::process::Command {
    std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}
