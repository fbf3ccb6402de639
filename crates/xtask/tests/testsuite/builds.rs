//! `check`'s view of how the workspace builds, on real cargo: fixture workspaces of path crates,
//! so that `cargo tree` and `cargo metadata` run offline.

use std::path::Path;

use anyhow::Result;
use xtask::check::{builds, patch_use};
use xtask::cmd;

use crate::kept;

fn write(root: &Path, files: &[(&str, &str)]) -> Result<()> {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
        std::fs::write(path, text)?;
    }
    Ok(())
}

/// `builds::check` on the workspace at `root`, after cargo wrote its lock file.
fn check(root: &Path) -> Result<String> {
    let mut lock = cmd::cargo();
    let lock = lock
        .current_dir(root)
        .args(["generate-lockfile", "--offline"]);
    cmd::run_checked(lock, "cargo generate-lockfile failed")?;
    let graph = patch_use::resolve(root)?;
    Ok(match builds::check(root, &graph) {
        Ok(_) => "ok".to_string(),
        Err(err) => format!("{err:#}"),
    })
}

const PACKAGE: &str = "version = \"0.0.0\"\nedition = \"2021\"\n";

/// `app` uses `dep` with feature `a`; its tests turn on `b` too.
fn features_fixture(root: &Path, normal: &str) -> Result<()> {
    write(
        root,
        &[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
            ),
            (
                "dep/Cargo.toml",
                &format!(
                    "[package]\nname = \"dep\"\n{PACKAGE}\n[lib]\ntest = false\ndoctest = false\n\n\
                     [features]\na = []\nb = []\n"
                ),
            ),
            ("dep/src/lib.rs", ""),
            (
                "app/Cargo.toml",
                &format!(
                    "[package]\nname = \"app\"\n{PACKAGE}\n[lib]\ntest = false\ndoctest = false\n\n\
                     [dependencies]\ndep = {{ path = \"../dep\", features = [{normal}] }}\n\n\
                     [dev-dependencies]\ndep = {{ path = \"../dep\", features = [\"b\"] }}\n"
                ),
            ),
            ("app/src/lib.rs", ""),
        ],
    )
}

#[test]
fn a_feature_that_only_tests_turn_on_is_named() -> Result<()> {
    let dir = kept::dir("features")?;
    features_fixture(dir.path(), "\"a\"")?;
    let message = check(dir.path())?;
    assert!(
        message.starts_with(
            "`cargo test` turns on features that `cargo repro` and `cargo xtask` leave off"
        ),
        "{message}"
    );
    assert!(message.contains("\n    dep v0.0.0 ("), "{message}");
    assert!(message.ends_with(": b\nturn them on in a normal dependency, as crates/testbed/Cargo.toml does for getrandom"), "{message}");

    let dir = kept::dir("features-alike")?;
    features_fixture(dir.path(), "\"a\", \"b\"")?;
    assert_eq!(check(dir.path())?, "ok");
    Ok(())
}

#[test]
fn test_binaries_and_empty_harnesses_are_named() -> Result<()> {
    let dir = kept::dir("harnesses")?;
    let root = dir.path();
    write(
        root,
        &[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
            ),
            (
                "app/Cargo.toml",
                &format!(
                    "[package]\nname = \"app\"\n{PACKAGE}\n[lib]\ntest = false\n\n\
                     [[bin]]\nname = \"app\"\npath = \"src/main.rs\"\n"
                ),
            ),
            ("app/src/lib.rs", "mod inner;\n"),
            ("app/src/inner.rs", "#[cfg(test)]\nmod tests {}\n"),
            ("app/src/main.rs", "fn main() {}\n"),
            ("app/tests/one.rs", "#[test]\nfn one() {}\n"),
            ("app/tests/two.rs", "#[test]\nfn two() {}\n"),
        ],
    )?;
    assert_eq!(
        check(root)?,
        "app has 2 test binaries (one, two): make each file a module of tests/testsuite/main.rs, \
         which links once\n\
         app's lib target app has unit tests that never run: set `test = true`\n\
         app's lib target app runs rustdoc for no doctest: set `doctest = false`\n\
         app's bin target app builds a test harness with no test: set `test = false`"
    );
    Ok(())
}
