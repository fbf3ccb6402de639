//! Where things are in the workspace, and how the tools ask cargo and rustc about it.

use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use cargo_metadata::MetadataCommand;

/// The one folder that holds everything `cargo xtask vendor` writes, marked generated.
pub const GENERATED_ROOT: &str = "crates/vendor";

/// The line of `.gitattributes` that marks the generated root.
pub const GITATTRIBUTES_LINE: &str = "crates/vendor/** linguist-generated=true";

/// The fuzzer's manifest: a workspace of its own, with its own lock file and `[patch]` entries.
pub const FUZZ_MANIFEST: &str = "crates/fuzz/Cargo.toml";

/// The file in each generated folder that says it is generated, by which command.
pub const MARKER: &str = "GENERATED.md";

/// Where a pinned crate is vendored, patched: what `[patch.crates-io]` points at.
pub fn vendored_dir(name: &str) -> String {
    format!("{GENERATED_ROOT}/{name}")
}

/// The benches' points: per version of the sampler, the modules that `crates/points` builds.
pub const POINTS_DIR: &str = "crates/vendor/points";

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

/// The program that runs cargo: the one that started us, if any.
pub fn cargo() -> std::process::Command {
    std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs `command`, its output shown as it comes, and fails with `failed` (and the exit status)
/// unless it succeeds.
pub fn run_checked(command: &mut std::process::Command, failed: &str) -> Result<()> {
    let program = Path::new(command.get_program()).display().to_string();
    let status = command.status();
    let status = status.with_context(|| format!("cannot run {program}"))?;
    ensure!(status.success(), "{failed} ({status})");
    Ok(())
}

/// What `command` prints, or an error with what it said on stderr; `name` says what ran.
pub fn stdout_of(name: &str, command: &mut std::process::Command) -> Result<String> {
    let output = command.output();
    let output = output.with_context(|| format!("cannot run {name}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(output.status.success(), "{name} failed: {}", stderr.trim());
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The host's target tuple, as rustc names it.
pub fn host() -> Result<String> {
    let name = "`rustc --print host-tuple`";
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut rustc = std::process::Command::new(rustc);
    let host = stdout_of(name, rustc.args(["--print", "host-tuple"]))?;
    let host = host.trim().to_string();
    ensure!(!host.is_empty(), "{name} printed no host");
    Ok(host)
}

/// `cargo metadata --offline` on `manifest`, with `options` too.
pub fn metadata_command(manifest: &Path, options: &[&str]) -> MetadataCommand {
    let mut command = MetadataCommand::new();
    let options = ["--offline"].iter().chain(options).map(|o| o.to_string());
    command
        .manifest_path(manifest)
        .other_options(options.collect::<Vec<_>>());
    command
}

/// `cargo metadata --no-deps` on `manifest`: the packages of its workspace, as cargo reads them.
pub fn metadata(manifest: &Path) -> Result<cargo_metadata::Metadata> {
    let metadata = metadata_command(manifest, &[]).no_deps().exec();
    metadata.with_context(|| format!("cannot read {} with cargo metadata", manifest.display()))
}
