//! Test folders that stay for inspection: a test's folders live under `target/test-tmp/<test>/`
//! and are left there when it ends, passed or failed; the next run of the same test clears
//! them first. Cargo's testsuite keeps its `target/tmp/cit/tN` the same way.

use std::cell::Cell;

/// A new folder for the running test, named after `label`.
pub fn dir(label: &str) -> anyhow::Result<tempfile::TempDir> {
    thread_local!(static CLEARED: Cell<bool> = const { Cell::new(false) });
    // libtest names each test's thread after the test.
    let test = std::thread::current()
        .name()
        .unwrap_or("main")
        .replace("::", "-");
    let base = shared::target_dir().join("test-tmp").join(test);
    if !CLEARED.replace(true) {
        let _ = std::fs::remove_dir_all(&base);
    }
    std::fs::create_dir_all(&base)?;
    Ok(tempfile::Builder::new()
        .prefix(&format!("{label}-"))
        .disable_cleanup(true)
        .tempdir_in(&base)?)
}
