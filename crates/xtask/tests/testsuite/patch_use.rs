//! The unused-patch detection, on real cargo: a fixture workspace whose crates.io is a local
//! directory source, so cargo resolves it offline.

use crate::common;
use crate::kept;

use std::path::Path;

use anyhow::Result;
use tempfile::TempDir;
use xtask::check::patch_use::{check, resolve};
use xtask::cmd;
use xtask::project;

fn write(root: &Path, path: &str, text: &str) -> Result<()> {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap())?;
    std::fs::write(path, text)?;
    Ok(())
}

fn package(name: &str, version: &str) -> String {
    format!("[package]\nname = \"{name}\"\nversion = \"{version}\"\nedition = \"2021\"\n")
}

/// The fixture's crates.io: a directory source, `registry/`, that serves demo 0.2.0.
fn crates_io(root: &Path) -> Result<()> {
    registry_crate(root, "demo", "demo", "0.2.0")?;
    write(
        root,
        ".cargo/config.toml",
        "[source.crates-io]\nreplace-with = \"fixture\"\n\n[source.fixture]\ndirectory = \"registry\"\n",
    )
}

/// A crate of the fixture's crates.io, a directory source: `registry/<folder>/`.
fn registry_crate(root: &Path, folder: &str, name: &str, version: &str) -> Result<()> {
    let dir = format!("registry/{folder}");
    write(root, &format!("{dir}/Cargo.toml"), &package(name, version))?;
    write(root, &format!("{dir}/src/lib.rs"), "")?;
    let checksum = "{\"files\":{},\"package\":null}";
    write(root, &format!("{dir}/.cargo-checksum.json"), checksum)
}

/// `app` asks crates.io for `demo = "0.2"`; crates.io (a directory source) has demo 0.2.0;
/// `[patch.crates-io]` offers `patched/` at `patched_version`.
fn fixture(patched_version: &str) -> Result<TempDir> {
    let temp = kept::dir("patch-use")?;
    let root = temp.path();
    write(
        root,
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nexclude = [\"patched\"]\nresolver = \"2\"\n\n\
         [patch.crates-io]\ndemo = { path = \"patched\" }\n",
    )?;
    write(
        root,
        "app/Cargo.toml",
        &format!(
            "{}\n[dependencies]\ndemo = \"0.2\"\n",
            package("app", "0.0.0")
        ),
    )?;
    write(root, "app/src/lib.rs", "")?;
    write(
        root,
        "patched/Cargo.toml",
        &package("demo", patched_version),
    )?;
    write(root, "patched/src/lib.rs", "")?;
    crates_io(root)?;
    lock(root)?;
    Ok(temp)
}

fn lock(root: &Path) -> Result<()> {
    let status = cmd::cargo()
        .current_dir(root)
        .args(["generate-lockfile", "--offline", "--quiet"])
        .status()?;
    assert!(status.success());
    Ok(())
}

#[test]
fn a_used_patch_passes() -> Result<()> {
    let ws = fixture("0.2.1")?;
    check(
        &resolve(ws.path())?,
        "demo",
        "0.2.1",
        &ws.path().join("patched"),
    )
}

#[test]
fn the_graph_is_this_hosts_only() -> Result<()> {
    // What only another platform needs may be missing from cargo's cache on a fresh machine.
    let ws = fixture("0.2.1")?;
    let root = ws.path();
    registry_crate(root, "other", "other", "1.0.0")?;
    let app = std::fs::read_to_string(root.join("app/Cargo.toml"))?;
    let app = app + "\n[target.'cfg(target_os = \"none\")'.dependencies]\nother = \"1\"\n";
    write(root, "app/Cargo.toml", &app)?;
    lock(root)?;
    let graph = resolve(root)?;
    assert!(graph.packages.iter().all(|p| p.name != "other"));
    assert!(graph.packages.iter().any(|p| p.name == "app"));
    Ok(())
}

#[test]
fn an_unused_patch_fails() -> Result<()> {
    // 0.3.0 does not match `demo = "0.2"`: cargo only warns and builds the registry's 0.2.0.
    let ws = fixture("0.3.0")?;
    let patched = ws.path().join("patched");
    let err = check(&resolve(ws.path())?, "demo", "0.3.0", &patched).unwrap_err();
    let err = err.to_string();
    assert!(
        err.starts_with("cargo builds demo 0.2.0 from registry+"),
        "{err}"
    );
    assert!(err.contains("[patch.crates-io] is unused"), "{err}");
    Ok(())
}

#[test]
fn a_second_copy_from_the_registry_fails() -> Result<()> {
    // Another member asks for demo 0.1, which only the registry has, beside the patched 0.2.
    let ws = fixture("0.2.1")?;
    let root = ws.path();
    registry_crate(root, "demo-0.1", "demo", "0.1.0")?;
    let old = format!(
        "{}\n[dependencies]\ndemo = \"0.1\"\n",
        package("old", "0.0.0")
    );
    write(root, "old/Cargo.toml", &old)?;
    write(root, "old/src/lib.rs", "")?;
    let manifest = std::fs::read_to_string(root.join("Cargo.toml"))?;
    let manifest = manifest.replace("[\"app\"]", "[\"app\", \"old\"]");
    write(root, "Cargo.toml", &manifest)?;
    lock(root)?;
    let err = check(&resolve(root)?, "demo", "0.2.1", &root.join("patched")).unwrap_err();
    let err = err.to_string();
    assert!(
        err.starts_with("cargo builds demo 0.1.0 from registry+"),
        "{err}"
    );
    Ok(())
}

#[test]
fn another_folder_or_version_than_the_pin_fails() -> Result<()> {
    let ws = fixture("0.2.1")?;
    let graph = resolve(ws.path())?;
    let patched = ws.path().join("patched");
    let err = check(&graph, "demo", "0.2.2", &patched).unwrap_err();
    let err = err.to_string();
    assert!(
        err.starts_with("cargo builds demo 0.2.1, but patches/upstream.toml pins 0.2.2"),
        "{err}"
    );
    let err = check(&graph, "demo", "0.2.1", &ws.path().join("app")).unwrap_err();
    assert!(
        err.to_string().starts_with("cargo builds demo from "),
        "{err}"
    );
    let gone = ws.path().join("gone");
    let err = check(&graph, "demo", "0.2.1", &gone).unwrap_err();
    assert_eq!(err.to_string(), format!("no folder {}", gone.display()));
    let err = check(&graph, "absent", "0.1.0", &patched).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cargo builds no absent: nothing in the workspace uses it on this host"
    );
    Ok(())
}

/// The README's way to use the fix before candle releases it: `[patch.crates-io]` with a git
/// dependency on this repository, where the vendored crate sits in a folder that the root
/// workspace excludes. Cargo finds it there by name, at the published version.
#[test]
fn a_git_dependency_on_a_repository_laid_out_as_this_one_patches_the_crate() -> Result<()> {
    let temp = kept::dir("patch-by-git")?;
    let root = temp.path();
    // The repository: a workspace that excludes the vendored crate, as ours does.
    let repo_dir = root.join("repository");
    let vendored = project::vendored_dir("demo");
    write(
        &repo_dir,
        "Cargo.toml",
        &format!("[workspace]\nmembers = []\nexclude = [\"{vendored}\"]\n"),
    )?;
    write(
        &repo_dir,
        &format!("{vendored}/Cargo.toml"),
        &package("demo", "0.2.0"),
    )?;
    write(
        &repo_dir,
        &format!("{vendored}/src/lib.rs"),
        "pub fn patched() {}\n",
    )?;
    common::commit_all(&git2::Repository::init(&repo_dir)?, "Vendor demo")?;
    // The user's project, and a crates.io that serves demo 0.2.0.
    let app = root.join("app");
    write(
        &app,
        "Cargo.toml",
        &format!(
            "{}\n[dependencies]\ndemo = \"0.2\"\n\n[patch.crates-io]\ndemo = {{ git = \"{}\" }}\n",
            package("app", "0.0.0"),
            url::file(&repo_dir)
        ),
    )?;
    write(&app, "src/lib.rs", "")?;
    crates_io(&app)?;
    let output = cmd::cargo()
        .current_dir(&app)
        .env("CARGO_HOME", root.join("cargo-home"))
        .args(["generate-lockfile", "--quiet"])
        .output()?;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lock = std::fs::read_to_string(app.join("Cargo.lock"))?;
    let demo = lock
        .split("[[package]]")
        .find(|entry| entry.contains("name = \"demo\""))
        .expect("demo is in the lock file");
    assert!(
        demo.contains(&format!("source = \"git+{}#", url::file(&repo_dir))),
        "{demo}"
    );
    Ok(())
}

mod url {
    /// The `file://` URL of a local folder, as cargo takes it for `git =`.
    pub fn file(path: &std::path::Path) -> String {
        format!("file://{}", path.display())
    }
}
