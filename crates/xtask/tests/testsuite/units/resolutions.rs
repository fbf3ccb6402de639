//! The unit tests of `resolutions`.

use std::path::Path;
use xtask::resolutions::*;

use anyhow::Result;
use fs_err as fs;
use xtask::branches::StackFile;
use xtask::series::Patch;

fn stack_file(text: &str, dir: &Path) -> Result<StackFile> {
    fs::write(dir.join("stack.toml"), text)?;
    xtask::branches::read(dir)
}

#[test]
fn a_folder_or_file_that_stands_for_nothing_is_named() -> Result<()> {
    let temp = tempfile::tempdir()?;
    let dir = temp.path();
    let patch = Patch {
        file_name: "0001-a.patch".into(),
        bytes: Vec::new(),
    };
    let base = "[base.\"3496\"]\nwhy = \"w\"\npath = \"p\"\nholds = \"h\"\n";
    let file = stack_file(base, dir)?;
    // No folder: the base is named, with no resolution.
    let all = load(dir, &file, std::slice::from_ref(&patch))?;
    assert_eq!((all.len(), names(&all).len()), (1, 0));
    fs::create_dir(dir.join("on-3497"))?;
    let err = load(dir, &file, &[]).unwrap_err().to_string();
    assert!(
        err.starts_with("patches/on-3497/ holds resolutions for a base"),
        "{err}"
    );
    fs::remove_dir(dir.join("on-3497"))?;
    fs::create_dir(dir.join("on-3496"))?;
    fs::write(dir.join("on-3496/0002-b.patch"), "")?;
    let err = load(dir, &file, &[patch]).unwrap_err().to_string();
    assert!(
        err.starts_with("patches/on-3496/0002-b.patch is not the file name of a patch"),
        "{err}"
    );
    // A [base] without what finds it in a tree.
    let err = stack_file("[base.\"3496\"]\nwhy = \"w\"\npath = \"p\"\n", dir).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("stack.toml: [base.\"3496\"] needs `holds = \"...\"`"),
        "{err}"
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
