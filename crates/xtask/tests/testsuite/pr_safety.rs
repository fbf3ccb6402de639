//! `cargo xtask pr` never loses work: it refuses a dirty tree, an existing branch, a missing
//! base and a conflict with the repository as it was, and writes only the branches' objects.

use crate::common;

use std::collections::BTreeSet;

use crate::common::stack::*;
use crate::common::*;
use anyhow::Result;
use git2::{Oid, Repository};
use xtask::cherry_pick::{Stop, Stopped};
use xtask::pr::{self, Options};
use xtask::series;
use xtask::series::stack_file::StackFile;
use xtask::series::Series;

/// Runs `pr` expecting a refusal that contains `expected`, and checks every file of the
/// repository, `.git` included, is byte for byte as before.
fn refused(repo: &Repository, base: &str, expected: &str) -> Result<()> {
    let root = repo.path().parent().unwrap().to_path_buf();
    let before = snapshot(&root);
    let err = format!("{:#}", prepare(repo, base, false).unwrap_err());
    assert!(err.contains(expected), "{err}");
    assert!(snapshot(&root) == before, "the repository changed");
    Ok(())
}

#[test]
fn a_dirty_tree_is_refused() -> Result<()> {
    let (temp, repo) = candle()?;
    std::fs::write(temp.path().join("notes.txt"), "mine\n")?;
    refused(
        &repo,
        "main",
        "has changes that are not committed (notes.txt)",
    )?;
    std::fs::remove_file(temp.path().join("notes.txt"))?;
    edit(
        temp.path(),
        "candle-transformers/src/lib.rs",
        "pub mod",
        "pub(crate) mod",
    )?;
    refused(&repo, "main", "(candle-transformers/src/lib.rs)")
}

#[test]
fn an_existing_branch_is_refused_unless_forced() -> Result<()> {
    let (_temp, repo) = candle()?;
    let head = repo.head()?.peel_to_commit()?;
    repo.branch("raise-it-again", &head, false)?;
    refused(&repo, "main", "branch `raise-it-again` already exists")?;
    let prepared = prepare(&repo, "main", true)?;
    assert_eq!(
        branch_tip(&repo, "raise-it-again")?,
        prepared.built.stack[1].commit
    );
    // The checked-out branch is never moved, even when forced.
    repo.set_head("refs/heads/raise-the-threshold")?;
    repo.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))?;
    let err = prepare(&repo, "main", true).unwrap_err().to_string();
    assert!(
        err.contains("branch `raise-the-threshold` is checked out"),
        "{err}"
    );
    Ok(())
}

#[test]
fn a_missing_or_detached_base_is_refused() -> Result<()> {
    let (_temp, repo) = candle()?;
    refused(&repo, "develop", "has no branch `develop`")?;
    let head = repo.head()?.target().unwrap().to_string();
    refused(&repo, &head, "is not a branch")
}

#[test]
fn a_conflicting_base_names_the_patch_the_file_and_the_lines() -> Result<()> {
    let (temp, repo) = candle()?;
    // Upstream changed the line the first patch changes: a true conflict, three ways.
    edit(
        temp.path(),
        MODULE,
        "temperature.and_then(|v| if v < 1e-7 { None } else { Some(v) })",
        "temperature.filter(|v| *v >= 1e-7)",
    )?;
    commit_all(&repo, "Simplify new")?;
    let prepared = prepare(&repo, "main", false)?;
    let stopped: Vec<(&str, &Stop)> = prepared
        .built
        .stopped
        .iter()
        .map(|s| (s.patch.number(), &s.why))
        .collect();
    let [("0001", stop @ Stop::PassedOver(_)), ("0002", Stop::BuildsOn(parent))] = &stopped[..]
    else {
        panic!("0001 conflicts and 0002 builds on it: {stopped:?}");
    };
    let conflict = stop.said().expect("a conflict in words");
    assert_eq!(parent, "0001");
    assert!(
        conflict.starts_with(
            "0001-generation-Raise-the-threshold.patch conflicts with the tree it goes on, in \
             candle-transformers/src/generation/mod.rs"
        ),
        "{conflict}"
    );
    // Both sides of the conflict, between git's markers, and how to redo the patch.
    assert!(conflict.contains("| <<<<<<<"), "{conflict}");
    assert!(
        conflict.contains("temperature.filter(|v| *v >= 1e-7)"),
        "{conflict}"
    );
    assert!(conflict.contains("if v < 1e-6 { None }"), "{conflict}");
    assert!(conflict.contains("to redo it:"), "{conflict}");
    // The third patch stands alone and gets its branch; the others get none.
    let made: Vec<&str> = prepared
        .built
        .stack
        .iter()
        .map(|e| e.branch.as_str())
        .collect();
    assert_eq!(made, ["test-argmax-on-ties"]);
    for name in ["raise-the-threshold", "raise-it-again"] {
        assert!(repo.find_branch(name, git2::BranchType::Local).is_err());
    }
    Ok(())
}

#[test]
fn a_patch_that_conflicts_with_its_parent_branch_is_named_with_both_sides() -> Result<()> {
    let (_temp, repo) = candle()?;
    // Without `[builds-on]`, the second patch goes onto the base, which lacks the line it changes.
    let series = common::stack::series(stack_patches()?, "", &[])?;
    let contributor = pr::contributor(&repo, None)?;
    let existing = pr::Existing::Refuse;
    let prepared = pr::prepare(
        &repo,
        &[published()?],
        &series,
        "main",
        &contributor,
        existing,
        &crate::common::stack::no_fallback,
    )
    .and_then(|planned| made(&repo, planned))?;
    let made: Vec<&str> = prepared
        .built
        .stack
        .iter()
        .map(|e| e.patch.number())
        .collect();
    assert_eq!(made, ["0001", "0003"]);
    let [Stopped {
        patch,
        why: stop @ Stop::PassedOver(_),
        carried: false,
    }] = &prepared.built.stopped[..]
    else {
        panic!("the second patch conflicts: {:?}", prepared.built.stopped);
    };
    let conflict = stop.said().expect("a conflict in words");
    assert_eq!(patch.number(), "0002");
    // The base is named by its commit, as the stack was built on it.
    let main = repo.head()?.target().unwrap().to_string();
    let main = xtask::git::short(&main);
    assert!(
        conflict.starts_with(&format!(
            "0002-generation-Raise-it-again.patch does not merge onto the base ({main}) without \
             a conflict, in candle-transformers/src/generation/mod.rs:"
        )),
        "{conflict}"
    );
    assert!(
        conflict.contains("1e-7") && conflict.contains("1e-5"),
        "{conflict}"
    );
    assert!(conflict.ends_with("name the patch it builds on in patches/stack.toml ([builds-on])"));
    assert!(repo
        .find_branch("raise-it-again", git2::BranchType::Local)
        .is_err());
    Ok(())
}

#[test]
fn options_are_checked_before_any_work() -> Result<()> {
    let ws = workspace()?;
    let options = Options {
        verify: true,
        base: "main".into(),
        ..Options::default()
    };
    let err = pr::run(&ws.layout, &options).unwrap_err().to_string();
    assert!(err.starts_with("--verify needs --candle <clone>"), "{err}");
    assert!(!ws.layout.target().exists(), "nothing is written");
    let options = Options {
        patches: vec!["1".into()],
        base: "main".into(),
        ..Options::default()
    };
    let err = pr::run(&ws.layout, &options).unwrap_err().to_string();
    assert!(err.contains("four-digit numbers"), "{err}");
    Ok(())
}

#[test]
fn a_notes_file_without_its_patch_is_refused() -> Result<()> {
    let ws = workspace()?;
    for patch in stack_patches()? {
        ws.add_patch(&patch.file_name, &patch.bytes)?;
    }
    std::fs::write(
        ws.layout
            .patches()
            .join("0001-generation-Raise-the-threshold.md"),
        "",
    )?;
    Series::load(&ws.layout.patches())?;
    std::fs::write(ws.layout.patches().join("0009-gone.md"), "")?;
    let err = Series::load(&ws.layout.patches()).unwrap_err().to_string();
    assert!(
        err.starts_with("patches/0009-gone.md belongs to no patch"),
        "{err}"
    );
    Ok(())
}

/// The object ids stored loose in `repo`, and its pack files.
fn stored(repo: &Repository) -> Result<(BTreeSet<String>, usize)> {
    let objects = repo.path().join("objects");
    let mut loose = BTreeSet::new();
    for dir in std::fs::read_dir(&objects)? {
        let dir = dir?;
        let name = dir.file_name().to_string_lossy().into_owned();
        if name.len() == 2 {
            for file in std::fs::read_dir(dir.path())? {
                loose.insert(format!("{name}{}", file?.file_name().to_string_lossy()));
            }
        }
    }
    let packs = std::fs::read_dir(objects.join("pack")).map_or(0, |d| d.count());
    Ok((loose, packs))
}

/// Every object `id` reaches, read through `repo`.
fn reachable(repo: &Repository, id: Oid, found: &mut BTreeSet<String>) -> Result<()> {
    if !found.insert(id.to_string()) {
        return Ok(());
    }
    let object = repo.find_object(id, None)?;
    if let Some(commit) = object.as_commit() {
        reachable(repo, commit.tree_id(), found)?;
        for parent in commit.parent_ids() {
            reachable(repo, parent, found)?;
        }
    } else if let Some(tree) = object.as_tree() {
        for entry in tree.iter() {
            reachable(repo, entry.id(), found)?;
        }
    }
    Ok(())
}

#[test]
fn pr_writes_the_branches_new_objects_and_nothing_else() -> Result<()> {
    let (temp, repo) = candle()?;
    let (before, packs_before) = stored(&repo)?;

    let prepared = prepare(&repo, "main", false)?;
    let (after, packs_after) = stored(&repo)?;
    assert_eq!(packs_after, packs_before, "no pack of the whole tree");
    // Read back through a new handle, without the in-memory objects of the first.
    let fresh = Repository::open(temp.path())?;
    let mut branches = BTreeSet::new();
    for entry in &prepared.built.stack {
        reachable(&fresh, entry.commit, &mut branches)?;
    }
    let written: BTreeSet<String> = after.difference(&before).cloned().collect();
    let new_in_branches: BTreeSet<String> = branches.difference(&before).cloned().collect();
    assert_eq!(written, new_in_branches);
    // Each commit, with its trees down to the file it changes (the root, candle-transformers/,
    // src/ or tests/, and generation/ for the module) and that file: 6 + 6 + 5.
    assert_eq!(written.len(), 17, "{written:?}");
    Ok(())
}

/// `patches/stack.toml` as the three-patch stack's workspace holds it.
fn stack_file(ws: &Workspace, text: &str) -> Result<StackFile> {
    std::fs::write(ws.layout.patches().join("stack.toml"), text)?;
    Ok(Series::load(&ws.layout.patches())?.stack)
}

#[test]
fn a_carried_patch_gets_no_branch_and_the_summary_says_why() -> Result<()> {
    let ws = workspace()?;
    let patches = stack_patches()?;
    for patch in &patches {
        ws.add_patch(&patch.file_name, &patch.bytes)?;
    }
    // The middle patch is carried: the third still applies after it, as the series was written.
    let file = stack_file(
        &ws,
        "[builds-on]\n\"0002\" = \"0001\"\n\n[carried.0002]\nwhy = \"an upstream pull request \
         does its job\"\nupstream = \"#3496\"\n",
    )?;
    file.check(&patches)?;
    let (proposed, carried) = file.split_carried(patches.clone());
    let numbers = |patches: &[series::Patch]| -> Vec<String> {
        patches.iter().map(|p| p.number().to_string()).collect()
    };
    assert_eq!(numbers(&proposed), ["0001", "0003"]);
    assert_eq!(numbers(&carried), ["0002"]);
    assert_eq!(
        pr::summary::carried(&carried, &file.carried),
        "Carried in this workspace's crates, not proposed (patches/stack.toml):\n  0002: \
         \"generation: Raise it again\": an upstream pull request does its job (#3496)\n"
    );
    assert_eq!(pr::summary::carried(&[], &file.carried), "");
    // Two branches, each from the base: the carried change is on neither.
    let (_temp, repo) = candle()?;
    let mut series = common::stack::series(proposed, "", &[])?;
    series.linear = patches;
    let contributor = pr::contributor(&repo, None)?;
    let prepared = pr::prepare(
        &repo,
        &[published()?],
        &series,
        "main",
        &contributor,
        pr::Existing::Refuse,
        &crate::common::stack::no_fallback,
    )
    .and_then(|planned| made(&repo, planned))?;
    let stack = &prepared.built.stack;
    assert_eq!(stack.len(), 2);
    assert!(stack.iter().all(|entry| entry.parent.is_none()));
    let module = String::from_utf8(blob_at(&repo, stack[1].commit, MODULE)?)?;
    assert!(
        !module.contains("1e-5") && !module.contains("1e-6"),
        "{module}"
    );
    let tests = String::from_utf8(blob_at(&repo, stack[1].commit, TESTS)?)?;
    assert!(tests.contains("fn sample_ties()"), "{tests}");
    Ok(())
}

#[test]
fn a_stack_file_that_names_no_patch_is_refused() -> Result<()> {
    let ws = workspace()?;
    let patches = stack_patches()?;
    for patch in &patches {
        ws.add_patch(&patch.file_name, &patch.bytes)?;
    }
    let cases = [
        (
            "[builds-on]\n\"9\" = \"0001\"\n",
            "patches/stack.toml names 9, which is no patch in patches/",
        ),
        (
            "[builds-on]\n\"0003\" = \"0000\"\n",
            "patches/stack.toml names 0000, which is no patch in patches/",
        ),
        (
            "[carried.0004]\nwhy = \"w\"\nupstream = \"#1\"\n",
            "patches/stack.toml names 0004, which is no patch in patches/",
        ),
        (
            "[builds-on]\n\"0002\" = \"0001\"\n[carried.0001]\nwhy = \"w\"\nupstream = \"#1\"\n",
            "patches/stack.toml: 0002 builds on 0001, which is carried, not proposed",
        ),
    ];
    for (text, expected) in cases {
        let err = stack_file(&ws, text).unwrap_err().to_string();
        assert!(err.starts_with(expected), "{text}: {err}");
        // `check` reads it before anything else, so it fails there too, naming the same.
        let err = xtask::check::run(&ws.layout).unwrap_err().to_string();
        assert!(err.starts_with(expected), "{text}: {err}");
    }
    for (text, expected) in [
        (
            "\"0002\" = \"0001\"\n",
            "stack.toml:1:1: unknown field `0002`, expected one of",
        ),
        (
            "[stack]\n\"0002\" = \"0001\"\n",
            "stack.toml:1:2: unknown field `stack`",
        ),
        ("[stack]\n", "stack.toml:1:2: unknown field `stack`"),
        ("[carried.0003]\n", "stack.toml:1:1: missing field `why`"),
    ] {
        let err = stack_file(&ws, text).unwrap_err().to_string();
        assert!(err.contains(expected), "{text}: {err}");
    }
    Ok(())
}
