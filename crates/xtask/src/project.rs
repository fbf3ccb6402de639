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
    /// The files of that folder it holds, by name; empty for all of them.
    pub only: &'static [&'static str],
    pub applied: Applied,
}

/// Which patches of the series a generated folder has applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// None: the files as published.
    None,
    /// Every patch.
    All,
    /// The patches whose file names sort before this prefix.
    Before(&'static str),
}

/// The series' patches from this one on make sampling faster and change no token. The benches'
/// middle side, the fixes copy, stops before it, so that the report shows what the fixes cost
/// and what the speed patches gain apart.
pub const FIRST_SPEED_PATCH: &str = "0008";

/// Where a pinned crate is vendored, patched: what `[patch.crates-io]` points at.
pub fn vendored_dir(name: &str) -> String {
    format!("crates/{name}")
}

/// A folder made from a part of one pinned crate.
struct Part {
    krate: &'static str,
    dir: &'static str,
    crate_dir: &'static str,
    only: &'static [&'static str],
    applied: Applied,
}

/// The unpatched `generation` module that tests and benches compare the patched crate with,
/// and the published candle-nn `sampling` module it calls (through crates/upstream-nn), so
/// that a patch to candle-nn does not reach the upstream side; the published tests, which the
/// upstream crate runs on that module and the `pr` tests build a candle-like repository from;
/// the patched module again, built like the unpatched one, so that the benches compare the
/// patches alone; and that module with the fixes only (`FIRST_SPEED_PATCH`).
const PARTS: [Part; 5] = [
    Part {
        krate: "candle-transformers",
        dir: "crates/upstream/src/generation",
        crate_dir: "src/generation",
        only: &[],
        applied: Applied::None,
    },
    Part {
        krate: "candle-nn",
        dir: "crates/upstream-nn/src/published",
        crate_dir: "src",
        only: &["sampling.rs"],
        applied: Applied::None,
    },
    Part {
        krate: "candle-transformers",
        dir: "crates/upstream/published-tests",
        crate_dir: "tests",
        only: &[],
        applied: Applied::None,
    },
    Part {
        krate: "candle-transformers",
        dir: "crates/patched-copy/src/generation",
        crate_dir: "src/generation",
        only: &[],
        applied: Applied::All,
    },
    Part {
        krate: "candle-transformers",
        dir: "crates/patched-copy/src/fixes",
        crate_dir: "src/generation",
        only: &[],
        applied: Applied::Before(FIRST_SPEED_PATCH),
    },
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
            only: &[],
            applied: Applied::All,
        })
        .collect();
    for part in PARTS {
        if names.contains(&part.krate) {
            all.push(Generated {
                dir: part.dir.to_string(),
                krate: part.krate.to_string(),
                crate_dir: part.crate_dir,
                only: part.only,
                applied: part.applied,
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
