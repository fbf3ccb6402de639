//! The unit tests of `trees`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use xtask::trees::*;

use crate::common::file;
use anyhow::Result;
use fs_err as fs;
use git2::{FileMode, Repository};

#[test]
fn a_written_tree_hashes_back_to_itself() -> Result<()> {
    let repo = &scratch()?;
    let mut script = file("run.sh", "#!/bin/sh\n");
    script.executable = true;
    let files = [
        file("src/lib.rs", "pub mod a;\n"),
        file("src/a/mod.rs", ""),
        file("README.md", "x"),
        script,
    ];
    let tree = tree_of_crates(repo, &[("", &files[..])])?;
    let temp = tempfile::tempdir()?;
    let dir = temp.path().join("out");
    write_tree(repo, tree, &dir)?;
    assert_eq!(tree_of_dir(repo, &dir)?, tree);
    fs::write(dir.join("src/a/mod.rs"), "// edited\n")?;
    let edited = tree_of_dir(repo, &dir)?;
    assert_eq!(differences(repo, tree, edited)?, ["modified src/a/mod.rs"]);
    Ok(())
}

#[test]
fn writing_a_tree_of_a_repository_leaves_its_work_tree_and_index() -> Result<()> {
    let temp = tempfile::tempdir()?;
    let repo = Repository::init(temp.path().join("repo"))?;
    // `link` and `run.sh` are plain files in HEAD: a link and an executable in the tree.
    let mut index = repo.index()?;
    for name in ["README.md", "link", "run.sh"] {
        fs::write(temp.path().join("repo").join(name), "old\n")?;
        index.add_path(Path::new(name))?;
    }
    index.write()?;
    let head = repo.find_tree(index.write_tree()?)?;
    let me = git2::Signature::now("me", "me@example.com")?;
    repo.commit(Some("HEAD"), &me, &me, "old", &head, &[])?;
    let index_file = fs::read(repo.path().join("index"))?;

    let mut update = git2::build::TreeUpdateBuilder::new();
    update.upsert("README.md", repo.blob(b"new\n")?, FileMode::Blob);
    update.upsert("link", repo.blob(b"README.md")?, FileMode::Link);
    update.upsert("run.sh", repo.blob(b"old\n")?, FileMode::BlobExecutable);
    let tree = update.create_updated(&repo, &head)?;
    let dir = temp.path().join("out");
    write_tree(&repo, tree, &dir)?;
    assert_eq!(fs::read_to_string(dir.join("README.md"))?, "new\n");
    #[cfg(unix)]
    {
        assert_eq!(fs::read_link(dir.join("link"))?, Path::new("README.md"));
        let mode = fs::metadata(dir.join("run.sh"))?.permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }
    let readme = fs::read_to_string(temp.path().join("repo/README.md"))?;
    assert_eq!(readme, "old\n");
    assert_eq!(fs::read(repo.path().join("index"))?, index_file);
    Ok(())
}
