//! Where things are in the workspace.

use std::path::{Path, PathBuf};

/// A folder that `cargo xtask vendor` writes and `cargo xtask check` compares: a folder of the
/// published crate, with `patches/` applied or as published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generated {
    /// Relative to the workspace root.
    pub dir: &'static str,
    /// The folder of the published crate it holds, `""` for the whole crate.
    pub crate_dir: &'static str,
    pub patched: bool,
}

/// The patched crate that `[patch.crates-io]` points at; the unpatched `generation` module
/// that tests and benches compare it with; the published tests, which the upstream crate runs
/// on that module and the `pr` tests build a candle-like repository from; and the patched
/// module again, built like the unpatched one, so that the benches compare the patches alone.
pub const GENERATED: [Generated; 4] = [
    Generated {
        dir: "crates/candle-transformers",
        crate_dir: "",
        patched: true,
    },
    Generated {
        dir: "crates/upstream/src/generation",
        crate_dir: "src/generation",
        patched: false,
    },
    Generated {
        dir: "crates/upstream/published-tests",
        crate_dir: "tests",
        patched: false,
    },
    Generated {
        dir: "crates/patched-copy/src/generation",
        crate_dir: "src/generation",
        patched: true,
    },
];

/// The paths the commands work on; tests point one at a temporary workspace.
#[derive(Clone, Debug)]
pub struct Layout {
    pub root: PathBuf,
    pub generated: Vec<Generated>,
}

impl Layout {
    /// This workspace.
    pub fn workspace() -> Layout {
        Layout::at(shared::root())
    }

    pub fn at(root: PathBuf) -> Layout {
        Layout {
            root,
            generated: GENERATED.to_vec(),
        }
    }

    pub fn patches(&self) -> PathBuf {
        self.root.join("patches")
    }

    pub fn pin(&self) -> PathBuf {
        self.patches().join("upstream.toml")
    }

    pub fn lockfile(&self) -> PathBuf {
        self.root.join("Cargo.lock")
    }

    /// Cargo's target folder, where the tools keep their scratch files and reports.
    pub fn target(&self) -> PathBuf {
        shared::target_dir_of(&self.root)
    }

    /// The patched crate's folder.
    pub fn vendored(&self) -> PathBuf {
        let generated = self
            .generated
            .iter()
            .find(|g| g.patched && g.crate_dir.is_empty());
        self.root
            .join(generated.map_or(GENERATED[0].dir, |g| g.dir))
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
