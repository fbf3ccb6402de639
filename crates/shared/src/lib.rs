//! What `xtask`, `testbed`, `cargo repro` and `bench-driver` share: where the workspace and
//! its target folder are, the upstream pin and sha256, how a binary exits.

pub mod bench;
pub mod pin;
pub mod repro;

/// The points holding the published crates and every patch; the others are patch numbers, but
/// for `CONTROL_POINT`.
pub const PUBLISHED_POINT: &str = "published";
pub const SERIES_POINT: &str = "series";
/// The published crates again, compiled as a module of its own: set against `PUBLISHED_POINT`,
/// two builds of identical code, it shows how far time moves with where the code lands alone.
pub const CONTROL_POINT: &str = "control";

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sha2::{Digest, Sha256};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/shared sits two folders below the workspace root")
        .to_path_buf()
}

/// `CARGO_TARGET_DIR` (relative to `root` when relative), else `root/target/`.
pub fn target_dir_of(root: &Path) -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR");
    root.join(dir.unwrap_or_else(|| "target".into()))
}

pub fn target_dir() -> PathBuf {
    target_dir_of(&root())
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// A binary's exit: an error goes to stderr as `error: ` and its chain of causes.
pub fn exit(result: anyhow::Result<()>) -> ExitCode {
    let Err(err) = result else {
        return ExitCode::SUCCESS;
    };
    eprintln!("error: {err:#}");
    ExitCode::FAILURE
}
