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
    // Someone else changed `g` too: a conflict with both sides' lines.
    let other = tree(repo, &[("f.rs", &lines.replace("g\n", "g2\n"))])?;
    let Outcome::Conflict(conflict) = change(repo, other, &changed)? else {
        panic!("a change to the same line conflicts");
    };
    let sides = FileConflict::Lines {
        ours: vec!["g2".into()],
        theirs: vec!["G".into()],
    };
    let files = vec![("f.rs".to_string(), sides)];
    assert_eq!(conflict, Conflict::Merge { patch: None, files });
    assert_eq!(
        conflict.to_string(),
        "in f.rs:\nf.rs:\n    | <<<<<<< what it goes on\n    | g2\n    | =======\n    | G\n    \
         | >>>>>>> the change"
    );
    // A change to a file that is not there.
    let empty = tree(repo, &[("other.rs", "x\n")])?;
    let Outcome::Conflict(conflict) = change(repo, empty, &changed)? else {
        panic!("a change to a missing file conflicts");
    };
    assert_eq!(
        conflict.to_string(),
        "in f.rs:\nf.rs:\nthe change edits the file, which does not exist"
    );
    Ok(())
}

#[test]
fn a_long_side_shows_its_first_lines_and_counts_the_rest() {
    let ours: Vec<String> = (1..=10).map(|i| format!("line {i}")).collect();
    let shown = FileConflict::Lines {
        ours,
        theirs: vec![],
    }
    .to_string();
    assert!(
        shown.contains("    | line 8\n    | ... (2 more lines)\n    | ======="),
        "{shown}"
    );
    assert!(!shown.contains("line 9"), "{shown}");
}
