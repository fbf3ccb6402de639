//! Where things are in the workspace.

use std::path::PathBuf;

/// `GENERATED_ROOT` as a literal, for the paths below it.
macro_rules! generated_root {
    () => {
        "crates/vendor"
    };
}

/// The one folder that holds everything `cargo xtask vendor` writes, marked generated.
pub const GENERATED_ROOT: &str = generated_root!();

/// The line of `.gitattributes` that marks the generated root.
pub const GITATTRIBUTES_LINE: &str = concat!(generated_root!(), "/** linguist-generated=true");

/// The fuzzer's manifest: a workspace of its own, with its own lock file and `[patch]` entries.
pub const FUZZ_MANIFEST: &str = "crates/fuzz/Cargo.toml";

/// The file in each generated folder that says it is generated, by which command.
pub const MARKER: &str = "GENERATED.md";

/// Where a pinned crate is vendored, patched: what `[patch.crates-io]` points at.
pub fn vendored_dir(name: &str) -> String {
    format!("{GENERATED_ROOT}/{name}")
}

/// The benches' points: per version of the sampler, the modules that `crates/points` builds.
pub const POINTS_DIR: &str = concat!(generated_root!(), "/points");

/// The crate whose published tests and points are generated, when it is pinned.
pub const TRANSFORMERS: &str = "candle-transformers";

/// What each point holds: its folder, the crate, and the crate's folder or file to put there.
/// candle-nn's `ops` is there for its CPU softmax, which the sampled variants call.
pub const POINT_PARTS: [(&str, &str, &str); 3] = [
    ("generation", TRANSFORMERS, "src/generation"),
    ("nn", "candle-nn", "src/sampling.rs"),
    ("nn", "candle-nn", "src/ops.rs"),
];

/// The committed benchmark report, as `cargo xtask bench-report` writes it.
pub const REPORT_DIR: &str = "docs/report";

/// The paths the commands work on; tests point one at a temporary workspace.
#[derive(Clone, Debug)]
pub struct Layout {
    pub root: PathBuf,
    target: PathBuf,
}

impl Layout {
    pub fn workspace() -> Layout {
        let root = shared::root();
        Layout {
            target: shared::target_dir_of(&root),
            root,
        }
    }

    /// A workspace at `root` other than the one being built, as a test makes: its target folder
    /// is its own `target/`, since `CARGO_TARGET_DIR` names this workspace's, and a test that
    /// wrote there would overwrite what the tools wrote for it.
    pub fn at(root: PathBuf) -> Layout {
        Layout {
            target: root.join("target"),
            root,
        }
    }

    pub fn patches(&self) -> PathBuf {
        self.root.join("patches")
    }

    pub fn pin(&self) -> PathBuf {
        shared::pin::file(&self.root)
    }

    /// Where `bench-report` writes the report that is committed: `docs/report/`.
    pub fn report_dir(&self) -> PathBuf {
        self.root.join(REPORT_DIR)
    }

    /// Cargo's target folder, where the tools keep their scratch files.
    pub fn target(&self) -> PathBuf {
        self.target.clone()
    }
}
