//! Tells the real-model tests whether the model is on disk (`bash ci/fetch-model.sh` puts it in
//! the target folder's `model/`): without it they are ignored, and `cargo test` counts them as
//! ignored rather than passed. CI downloads the model and sets `REPRO_REQUIRE_MODEL`, where a
//! missing model fails the build instead.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(model_on_disk)");
    println!("cargo::rerun-if-env-changed=CARGO_TARGET_DIR");
    println!("cargo::rerun-if-env-changed=REPRO_REQUIRE_MODEL");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/repro sits two folders below the workspace root");
    // The target folder as `shared::target_dir` finds it; shared is no build dependency.
    let target = std::env::var_os("CARGO_TARGET_DIR").unwrap_or_else(|| "target".into());
    let dir = root.join(target).join("model");
    // The folder's time changes when the model is added or removed.
    println!("cargo::rerun-if-changed={}", dir.display());
    let on_disk = std::fs::read_dir(&dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".gguf"))
    });
    if on_disk {
        println!("cargo::rustc-cfg=model_on_disk");
    } else if std::env::var_os("REPRO_REQUIRE_MODEL").is_some() {
        panic!(
            "REPRO_REQUIRE_MODEL is set but no model is in {}: run `bash ci/fetch-model.sh`",
            dir.display()
        );
    }
}
