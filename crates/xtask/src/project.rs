//! Where things are in the workspace.

use std::path::{Path, PathBuf};

use crate::published::Published;

/// A folder that `cargo xtask vendor` writes and `cargo xtask check` compares, relative to the
/// workspace root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generated {
    pub dir: String,
    pub source: Source,
}

/// What a generated folder is made from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The folder `crate_dir` (`""` for the whole crate) of one pinned crate, with `patches/`
    /// applied or as published.
    Part {
        krate: String,
        crate_dir: &'static str,
        patched: bool,
    },
    /// The benches' points (`POINTS_DIR`).
    Points,
}

/// The one folder that holds everything `cargo xtask vendor` writes. `.gitattributes` marks it
/// generated (`GITATTRIBUTES_LINE`), and each folder in it carries a `MARKER` file.
pub const GENERATED_ROOT: &str = "crates/vendor";

pub const GITATTRIBUTES_LINE: &str = "crates/vendor/** linguist-generated=true";

/// The fuzzer's manifest: a workspace of its own, with its own lock file and `[patch]` entries.
pub const FUZZ_MANIFEST: &str = "crates/fuzz/Cargo.toml";

/// The file in each generated folder that says it is generated, by which command.
pub const MARKER: &str = "GENERATED.md";

/// Where a pinned crate is vendored, patched: what `[patch.crates-io]` points at.
pub fn vendored_dir(name: &str) -> String {
    format!("{GENERATED_ROOT}/{name}")
}

/// The benches' points: one folder per version of the sampler that a bench measures, each the
/// `generation` module (and candle-nn's `sampling.rs`, which it calls) as one tree holds them.
/// `crates/points` builds each as a module of its own; the `published` point is also what tests
/// compare the patched crate with.
pub const POINTS_DIR: &str = "crates/vendor/points";

/// What each point holds: its folder, the crate, the crate's folder and the files of it (all
/// of them when empty).
pub const POINT_PARTS: [(&str, &str, &str, &[&str]); 2] = [
    ("generation", "candle-transformers", "src/generation", &[]),
    ("nn", "candle-nn", "src", &["sampling.rs"]),
];

/// Every generated folder for the crates `published` holds: each crate whole and patched, then,
/// when candle-transformers is pinned, its tests as published (crates/testbed runs them on the
/// `published` point, and the `pr` tests build a candle-like repository from them) and the points.
pub fn generated(published: &[Published]) -> Vec<Generated> {
    let part = |dir, krate: &str, crate_dir, patched| Generated {
        dir,
        source: Source::Part {
            krate: krate.to_string(),
            crate_dir,
            patched,
        },
    };
    let mut all: Vec<Generated> = published
        .iter()
        .map(|p| part(vendored_dir(&p.pin.name), &p.pin.name, "", true))
        .collect();
    let transformers = POINT_PARTS[0].1;
    if published.iter().any(|p| p.pin.name == transformers) {
        let tests = format!("{GENERATED_ROOT}/published-tests");
        all.push(part(tests, transformers, "tests", false));
        all.push(Generated {
            dir: POINTS_DIR.to_string(),
            source: Source::Points,
        });
    }
    all
}

/// The paths the commands work on; tests point one at a temporary workspace.
#[derive(Clone, Debug)]
pub struct Layout {
    pub root: PathBuf,
}

impl Layout {
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
