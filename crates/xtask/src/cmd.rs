//! Running cargo, rustc and the other programs the commands call, and asking cargo about a
//! workspace.

use std::path::Path;

use anyhow::{ensure, Context, Result};
use cargo_metadata::MetadataCommand;

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
