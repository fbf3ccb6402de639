//! The unit tests of `apply`.

use anyhow::Result;
use git2::{FileMode, Oid, Repository};
use xtask::apply::*;

fn tree(repo: &Repository, files: &[(&str, &str)]) -> Result<Oid> {
    let mut update = git2::build::TreeUpdateBuilder::new();
    for (path, text) in files {
        update.upsert(*path, repo.blob(text.as_bytes())?, FileMode::Blob);
    }
    let empty = repo.find_tree(repo.treebuilder(None)?.write()?)?;
    Ok(update.create_updated(repo, &empty)?)
}

fn text(repo: &Repository, tree: Oid, path: &str) -> Result<String> {
    let entry = repo.find_tree(tree)?.get_path(std::path::Path::new(path))?;
    let blob = repo.find_blob(entry.id())?;
    Ok(String::from_utf8_lossy(blob.content()).into_owned())
}

#[test]
fn a_change_lands_where_its_lines_moved_and_conflicts_where_they_changed() -> Result<()> {
    let repo = &xtask::trees::scratch()?;
    let lines = "a\nb\nc\nd\ne\nf\ng\nh\n";
    let before = tree(repo, &[("f.rs", lines)])?;
    let after = tree(repo, &[("f.rs", &lines.replace("g\n", "G\n"))])?;
    let changed = changes(repo, before, after)?;
    // Lines added at the top move `g` down: the change still lands on it.
    let moved = tree(repo, &[("f.rs", &format!("new\n{lines}"))])?;
    let Outcome::Applied { tree: merged, .. } = change(repo, moved, &changed)? else {
        panic!("a change whose lines moved merges");
    };
    assert_eq!(text(repo, merged, "f.rs")?, "new\na\nb\nc\nd\ne\nf\nG\nh\n");
    // The tree holds the change already.
    assert_eq!(change(repo, after, &changed)?, Outcome::AlreadyThere);
    // Someone else changed `g` too: a conflict that shows both sides.
    let other = tree(repo, &[("f.rs", &lines.replace("g\n", "g2\n"))])?;
    let Outcome::Conflict(conflict) = change(repo, other, &changed)? else {
        panic!("a change to the same line conflicts");
    };
    assert!(conflict.starts_with("in f.rs:\nf.rs:\n"), "{conflict}");
    assert!(conflict.contains("| g2"), "{conflict}");
    assert!(conflict.contains("| G"), "{conflict}");
    // A change to a file that is not there.
    let empty = tree(repo, &[("other.rs", "x\n")])?;
    let Outcome::Conflict(conflict) = change(repo, empty, &changed)? else {
        panic!("a change to a missing file conflicts");
    };
    assert_eq!(
        conflict,
        "in f.rs:\nf.rs:\nthe change edits the file, which does not exist"
    );
    Ok(())
}
