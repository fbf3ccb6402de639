//! Is `[patch.crates-io]` used? Cargo only warns when it is not, and then builds the published
//! crate in its place, so every test would quietly run on unpatched code.

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::project;

/// What `check_lock` reads of a lock file: `[[package]]` and `[[patch.unused]]`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Lock {
    package: Vec<LockEntry>,
    patch: LockPatch,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct LockPatch {
    unused: Vec<LockEntry>,
}

#[derive(Debug, serde::Deserialize)]
struct LockEntry {
    name: String,
    version: String,
    source: Option<String>,
}

/// Fails unless `lock` resolves `name` once, to the patch at `version`, and not as unused.
pub fn check_lock(lock: &str, name: &str, version: &str) -> Result<()> {
    let lock: Lock = toml_edit::de::from_str(lock).context("Cargo.lock is not a lock file")?;
    if let Some(unused) = lock.patch.unused.iter().find(|e| e.name == name) {
        bail!(
            "Cargo.lock lists {name} {} under [[patch.unused]]: cargo builds the published crate \
             instead of {}; make [workspace.dependencies] ask for {version}",
            unused.version,
            project::vendored_dir(name)
        );
    }
    let packages: Vec<&LockEntry> = lock.package.iter().filter(|e| e.name == name).collect();
    if let Some(registry) = packages.iter().find(|p| p.source.is_some()) {
        bail!(
            "Cargo.lock resolves {name} {} from {}: some dependency is not served by \
             [patch.crates-io]",
            registry.version,
            registry.source.as_deref().unwrap_or_default()
        );
    }
    match packages[..] {
        [] => bail!("Cargo.lock has no {name}: nothing in the workspace uses it"),
        [package] if package.version == version => Ok(()),
        [package] => bail!(
            "Cargo.lock resolves {name} {}, but patches/upstream.toml pins {version}: run \
             `cargo xtask vendor`",
            package.version
        ),
        _ => bail!("Cargo.lock resolves {name} more than once"),
    }
}

/// Fails unless cargo builds `name` from `vendored`; offline and `--locked`, so it changes nothing.
pub fn check_cargo(manifest_dir: &Path, name: &str, vendored: &Path) -> Result<()> {
    let output = project::cargo()
        .current_dir(manifest_dir)
        .args(["tree", "--locked", "--offline", "--workspace"])
        .args(["--prefix", "none", "--depth", "0"])
        .args(["--edges", "all", "--invert", name])
        .output()
        .context("cannot run `cargo tree`")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if let Some(warning) = stderr
        .lines()
        .find(|l| l.contains("was not used in the crate graph"))
    {
        bail!("cargo says: {}", warning.trim());
    }
    if !output.status.success() {
        bail!("`cargo tree --invert {name}` failed: {}", stderr.trim());
    }
    let vendored = vendored.canonicalize().unwrap_or(vendored.to_path_buf());
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    let is_vendored = |line: &str| {
        line.rsplit_once(" (")
            .and_then(|(_, path)| path.strip_suffix(')'))
            .and_then(|path| Path::new(path).canonicalize().ok())
            .is_some_and(|path| path == vendored)
    };
    match lines[..] {
        [line] if is_vendored(line) => Ok(()),
        _ => bail!(
            "cargo builds `{}` for {name}, not {}",
            lines.join("`, `"),
            vendored.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const USED: &str = r#"
[[package]]
name = "candle-core"
version = "0.11.1"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "candle-transformers"
version = "0.11.1"
dependencies = [
 "candle-core",
]
"#;

    #[test]
    fn a_used_patch_passes() -> Result<()> {
        check_lock(USED, "candle-transformers", "0.11.1")
    }

    #[test]
    fn an_unused_patch_fails() {
        let lock = r#"
[[package]]
name = "candle-transformers"
version = "0.11.1"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "2b1e1abeac23d7df4f94e8a3852b3dbb661d332e37c3bef479507bac867187b2"

[[patch.unused]]
name = "candle-transformers"
version = "0.11.2"
"#;
        let err = check_lock(lock, "candle-transformers", "0.11.2")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("Cargo.lock lists candle-transformers 0.11.2 under [[patch.unused]]"),
            "{err}"
        );
    }

    #[test]
    fn a_second_copy_from_the_registry_fails() {
        let lock = format!(
            "{USED}\n[[package]]\nname = \"candle-transformers\"\nversion = \"0.10.0\"\n\
             source = \"registry+https://github.com/rust-lang/crates.io-index\"\n"
        );
        let err = check_lock(&lock, "candle-transformers", "0.11.1")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("Cargo.lock resolves candle-transformers 0.10.0 from registry+"),
            "{err}"
        );
    }

    #[test]
    fn another_version_than_the_pin_fails() {
        let err = check_lock(USED, "candle-transformers", "0.12.0")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("but patches/upstream.toml pins 0.12.0"),
            "{err}"
        );
    }
}
