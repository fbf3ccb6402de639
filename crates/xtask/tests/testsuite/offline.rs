//! `cargo xtask check` offline: the binary itself, with a cargo home that has no `.crate`.

use crate::kept;

#[test]
fn check_without_the_crate_says_what_to_run() -> anyhow::Result<()> {
    let empty_home = kept::dir("cargo-home")?;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("check")
        .env("CARGO_HOME", empty_home.path())
        .output()?;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let pin = xtask::pin::read(&xtask::project::Layout::workspace().pin())?.remove(0);
    let expected = format!(
        "error: {} is not in cargo's cache (no {}-{}.crate under ",
        pin.label(),
        pin.name,
        pin.version
    );
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert!(
        stderr
            .trim_end()
            .ends_with("run `cargo xtask fetch` once while online"),
        "{stderr}"
    );
    Ok(())
}
