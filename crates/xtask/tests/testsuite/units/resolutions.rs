//! The unit tests of `resolutions`.

use std::path::Path;
use xtask::series::resolutions::*;

use anyhow::Result;
use fs_err as fs;
use xtask::series::Series;

/// `patches/` in `dir` with `stack.toml` holding `text`, loaded.
fn load_with(text: &str, dir: &Path) -> Result<Series> {
    fs::write(dir.join("stack.toml"), text)?;
    Series::load(dir)
}

#[test]
fn a_folder_or_file_that_stands_for_nothing_is_named() -> Result<()> {
    let temp = tempfile::tempdir()?;
    let dir = temp.path();
    let base = "[base.\"3496\"]\nwhy = \"w\"\npath = \"p\"\nholds = \"h\"\n";
    // No folder: the base is named, with no resolution.
    let all = load_with(base, dir)?.resolutions;
    assert_eq!((all.len(), names(&all).len()), (1, 0));
    fs::create_dir(dir.join("on-3497"))?;
    let err = load_with(base, dir).unwrap_err().to_string();
    assert!(
        err.starts_with("patches/on-3497/ holds resolutions for a base"),
        "{err}"
    );
    fs::remove_dir(dir.join("on-3497"))?;
    let mail =
        "From: A <a@b.c>\nDate: Thu, 1 Jan 1970 00:00:00 +0000\nSubject: [PATCH] a\n\nBody.\n";
    fs::write(dir.join("0001-a.patch"), mail)?;
    fs::create_dir(dir.join("on-3496"))?;
    fs::write(dir.join("on-3496/0002-b.patch"), "")?;
    let err = load_with(base, dir).unwrap_err().to_string();
    assert!(
        err.starts_with("patches/on-3496/0002-b.patch is not the file name of a patch"),
        "{err}"
    );
    // A [base] without what finds it in a tree.
    let err = load_with("[base.\"3496\"]\nwhy = \"w\"\npath = \"p\"\n", dir).unwrap_err();
    assert!(
        format!("{err:#}").contains("missing field `holds`"),
        "{err:#}"
    );
    Ok(())
}

/// Each resolution's path under `patches/`.
fn names(all: &[Resolutions]) -> Vec<String> {
    all.iter()
        .flat_map(|r| {
            r.patches
                .iter()
                .map(move |p| format!("on-{}/{}", r.name, p.file_name))
        })
        .collect()
}
