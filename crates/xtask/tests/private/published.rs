use super::*;

/// A plain, non-executable file of a crate, for the unit tests of the modules that read crates.
pub(crate) fn file(path: &str, data: &str) -> CrateFile {
    CrateFile {
        path: path.into(),
        data: data.as_bytes().to_vec(),
        executable: false,
    }
}
