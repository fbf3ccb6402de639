//! `cargo xtask pr` on a small repository shaped like candle's, made from the published sources
//! (`candle-transformers/src/generation/mod.rs`, its tests, a manifest), with the real patches.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Result;
use common::*;
use git2::{Oid, Repository};
use xtask::fsutil::TempDir;
use xtask::pr::{self, Prepared};
use xtask::project::Layout;
use xtask::series::{self, Patch};

fn patches() -> Result<Vec<Patch>> {
    series::load(&Layout::workspace().patches())
}

/// A clone-like repository: the published crate under `candle-transformers/` on `main`.
fn candle() -> Result<(TempDir, Repository)> {
    let temp = TempDir::new("candle")?;
    let repo = upstream_repo(temp.path(), &crate_files())?;
    Ok((temp, repo))
}

fn prepare(repo: &Repository, base: &str, branch: &str, force: bool) -> Result<Prepared> {
    pr::prepare(repo, &published()?, &patches()?, base, branch, force)
}

fn blob_at(repo: &Repository, commit: Oid, path: &str) -> Result<Vec<u8>> {
    let tree = repo.find_commit(commit)?.tree()?;
    let entry = tree.get_path(Path::new(path))?;
    Ok(repo.find_blob(entry.id())?.content().to_vec())
}

#[test]
fn pr_makes_one_commit_per_patch_and_touches_nothing_else() -> Result<()> {
    let (temp, repo) = candle()?;
    let head_before = repo.head()?.target();
    let prepared = prepare(&repo, "main", "greedy", false)?;

    let patches = patches()?;
    assert_eq!(prepared.commits.len(), patches.len());
    let branch = repo.find_branch("greedy", git2::BranchType::Local)?;
    assert_eq!(branch.get().target(), prepared.commits.last().copied());
    for (id, patch) in prepared.commits.iter().zip(&patches) {
        let commit = repo.find_commit(*id)?;
        let message = patch.message()?;
        assert_eq!(commit.message().ok(), Some(message.text().as_str()));
        assert_eq!(
            commit.author().name().ok(),
            Some(message.author_name.as_str())
        );
        assert_eq!(
            commit.author().email().ok(),
            Some(message.author_email.as_str())
        );
        assert_eq!(commit.author().when().seconds(), message.time.0);
    }
    // The branch's files are the vendored crate's, which `cargo xtask check` proves to be
    // published + patches.
    let vendored = Layout::workspace().root.join("crates/candle-transformers");
    let tip = *prepared.commits.last().unwrap();
    for path in ["src/generation/mod.rs", "tests/generation_tests.rs"] {
        let at_tip = blob_at(&repo, tip, &format!("candle-transformers/{path}"))?;
        assert!(at_tip == std::fs::read(vendored.join(path))?, "{path}");
    }
    // The user's branch and work tree are as they were.
    assert_eq!(repo.head()?.target(), head_before);
    assert_eq!(repo.head()?.shorthand().ok(), Some("main"));
    assert!(xtask::git::uncommitted(&repo, None)?.is_empty());
    assert_eq!(
        std::fs::read(
            temp.path()
                .join("candle-transformers/src/generation/mod.rs")
        )?,
        published_generation()
    );
    // The pinned commit is not in this repository: the files are compared with the crate's.
    assert!(
        prepared.base[0].contains("is not in this clone"),
        "{:?}",
        prepared.base
    );
    assert!(prepared.base[1..]
        .iter()
        .all(|l| l.contains("as published in candle-transformers 0.11.1")));
    // The series written from the branch is the one in patches/, but for the commit id line.
    for ((name, bytes), patch) in prepared.series.iter().zip(&patches) {
        assert_eq!(name, &patch.file_name);
        assert_eq!(
            without_first_line(bytes),
            without_first_line(&patch.bytes),
            "{name}"
        );
    }
    Ok(())
}

fn without_first_line(bytes: &[u8]) -> &[u8] {
    let at = bytes.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
    &bytes[at..]
}

#[test]
fn format_patch_of_the_branch_gives_back_the_patch_files() -> Result<()> {
    let (_candle_dir, repo) = candle()?;
    prepare(&repo, "main", "greedy", false)?;
    // A workspace whose patches/ holds the pin, in a repository of its own.
    let ws = workspace()?;
    let ws_repo = Repository::init(&ws.layout.root)?;
    commit_all(&ws_repo, "pin")?;
    xtask::format_patch::run(&ws.layout, repo.path().parent().unwrap(), "greedy", "main")?;
    let written = series::load(&ws.layout.patches())?;
    let original = patches()?;
    assert_eq!(written.len(), original.len());
    for (written, original) in written.iter().zip(&original) {
        assert_eq!(written.file_name, original.file_name);
        assert_eq!(written.message()?, original.message()?);
        assert_eq!(
            without_first_line(&written.bytes),
            without_first_line(&original.bytes)
        );
    }
    // The pin came through the swap.
    assert!(ws.layout.pin().is_file());
    Ok(())
}

/// Runs `pr` expecting a refusal that starts with or contains `expected`, and checks every file
/// of the repository, `.git` included, is byte for byte as before.
fn refused(repo: &Repository, base: &str, branch: &str, expected: &str) -> Result<()> {
    let root = repo.path().parent().unwrap().to_path_buf();
    let before = snapshot(&root);
    let err = format!("{:#}", prepare(repo, base, branch, false).unwrap_err());
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
        "greedy",
        "has changes that are not committed (notes.txt)",
    )?;
    std::fs::remove_file(temp.path().join("notes.txt"))?;
    edit(
        temp.path(),
        "candle-transformers/src/lib.rs",
        "pub mod",
        "pub(crate) mod",
    )?;
    refused(&repo, "main", "greedy", "(candle-transformers/src/lib.rs)")
}

#[test]
fn an_existing_branch_is_refused_unless_forced() -> Result<()> {
    let (_temp, repo) = candle()?;
    let head = repo.head()?.peel_to_commit()?;
    repo.branch("greedy", &head, false)?;
    refused(&repo, "main", "greedy", "branch `greedy` already exists")?;
    let prepared = prepare(&repo, "main", "greedy", true)?;
    let branch = repo.find_branch("greedy", git2::BranchType::Local)?;
    assert_eq!(branch.get().target(), prepared.commits.last().copied());
    // The checked-out branch is never moved, even when forced.
    let err = prepare(&repo, "main", "main", true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("branch `main` is checked out"), "{err}");
    Ok(())
}

#[test]
fn a_missing_or_detached_base_is_refused() -> Result<()> {
    let (_temp, repo) = candle()?;
    refused(&repo, "develop", "greedy", "has no branch `develop`")?;
    let head = repo.head()?.target().unwrap().to_string();
    refused(&repo, &head, "greedy", "is not a branch")
}

#[test]
fn a_conflicting_base_names_the_patch_and_the_hunk() -> Result<()> {
    let (temp, repo) = candle()?;
    // Upstream moved: the line 0001 changes in `new` is not there any more.
    edit(
        temp.path(),
        "candle-transformers/src/generation/mod.rs",
        "temperature.and_then(|v| if v < 1e-7 { None } else { Some(v) })",
        "temperature.filter(|v| *v >= 1e-7)",
    )?;
    commit_all(&repo, "Simplify new")?;
    refused(
        &repo,
        "main",
        "greedy",
        "0001-generation-Sample-greedily-at-temperature-0.patch does not apply: \
         candle-transformers/src/generation/mod.rs: hunk",
    )?;
    let err = format!("{:#}", prepare(&repo, "main", "greedy", false).unwrap_err());
    assert!(err.contains("is as it was"), "{err}");
    assert!(
        err.contains("temperature.and_then(|v| if v < 1e-7"),
        "{err}"
    );
    Ok(())
}

#[test]
fn open_pull_requests_on_the_same_files_are_listed() -> Result<()> {
    let (temp, repo) = candle()?;
    let main = repo.head()?.peel_to_commit()?;
    let pull = |number: u32, path: &str, from: &str, to: &str| -> Result<()> {
        let mut index = repo.index()?;
        std::fs::write(
            temp.path().join(path),
            std::fs::read_to_string(temp.path().join(path))?.replacen(from, to, 1),
        )?;
        index.add_path(Path::new(path))?;
        let tree = repo.find_tree(index.write_tree()?)?;
        let author = git2::Signature::now("Someone", "someone@example.com")?;
        let commit = repo.commit(
            None,
            &author,
            &author,
            &format!("Pull request {number}"),
            &tree,
            &[&main],
        )?;
        repo.reference(&format!("refs/pull/{number}/head"), commit, false, "")?;
        // Back to main's files, so that the work tree stays clean.
        repo.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))?;
        Ok(())
    };
    let module = "candle-transformers/src/generation/mod.rs";
    pull(
        7,
        module,
        "//! Logit Processing and Sampling",
        "//! Logit processing and sampling",
    )?;
    pull(
        8,
        module,
        "if v < 1e-7 { None } else { Some(v) }",
        "if v < 1e-6 { None } else { Some(v) }",
    )?;
    pull(
        9,
        "candle-transformers/src/lib.rs",
        "pub mod generation;",
        "pub mod generation; // x",
    )?;
    let prepared = prepare(&repo, "main", "greedy", false)?;
    assert_eq!(prepared.overlaps.len(), 2, "{:?}", prepared.overlaps);
    assert!(prepared.overlaps[0].starts_with("Pull request #7 (\"Pull request 7\") also changes candle-transformers/src/generation/mod.rs; the patches apply on top of it"), "{}", prepared.overlaps[0]);
    assert!(
        prepared.overlaps[1].starts_with("Pull request #8"),
        "{}",
        prepared.overlaps[1]
    );
    assert!(
        prepared.overlaps[1].contains("the patches conflict with it"),
        "{}",
        prepared.overlaps[1]
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
fn pr_writes_the_branchs_new_objects_and_nothing_else() -> Result<()> {
    let (temp, repo) = candle()?;
    // A pull request the patches apply on: trying them there must write nothing.
    let module = "candle-transformers/src/generation/mod.rs";
    edit(
        temp.path(),
        module,
        "//! Logit Processing and Sampling",
        "//! Logit processing and sampling",
    )?;
    let pull = commit_all(&repo, "A pull request")?;
    repo.reference("refs/pull/7/head", pull, false, "")?;
    repo.reset(
        repo.find_commit(pull)?.parent(0)?.as_object(),
        git2::ResetType::Hard,
        None,
    )?;
    let (before, packs_before) = stored(&repo)?;

    let prepared = prepare(&repo, "main", "greedy", false)?;
    assert!(prepared.overlaps[0].contains("the patches apply on top of it"));
    let (after, packs_after) = stored(&repo)?;
    assert_eq!(packs_after, packs_before, "no pack of the whole tree");
    // Read back through a new handle, without the in-memory objects of the first.
    let fresh = Repository::open(temp.path())?;
    let mut branch = BTreeSet::new();
    reachable(&fresh, *prepared.commits.last().unwrap(), &mut branch)?;
    let written: BTreeSet<String> = after.difference(&before).cloned().collect();
    let new_in_branch: BTreeSet<String> = branch.difference(&before).cloned().collect();
    assert_eq!(written, new_in_branch);
    // Two commits, each with its trees down to both changed files (the root,
    // candle-transformers/, src/, src/generation/, tests/) and their two blobs.
    assert_eq!(written.len(), 2 * 8, "{written:?}");
    Ok(())
}

#[test]
fn the_title_and_body_come_from_the_patches() -> Result<()> {
    let patches = patches()?;
    let messages: Vec<_> = patches.iter().map(Patch::message).collect::<Result<_>>()?;
    assert_eq!(
        pr::title(&messages),
        "Sample greedily at temperature 0; report bad input instead of rand's error"
    );
    assert_eq!(
        pr::default_branch(&messages[..1]),
        "sample-greedily-at-temperature-0"
    );
    let tests = pr::added_tests(&patches[0]);
    assert_eq!(
        tests,
        [
            "sample_with_zero_temperature_from_sampling",
            "sample_with_negative_temperature",
            "sample_with_tiny_temperature",
            "sample_with_nan_temperature",
            "new_and_from_sampling_agree"
        ]
    );
    let prepared = Prepared {
        branch: None,
        commits: Vec::new(),
        base: vec!["Base line.".into()],
        overlaps: Vec::new(),
        audit: Some(pr::sites_in(
            "examples/x.rs",
            "let temperature = args.temperature;\nlet sampling = if temperature <= 0. {\n    Sampling::ArgMax\n} else {\n    Sampling::All { temperature }\n};\nLogitsProcessor::from_sampling(seed, sampling)\n",
        )),
        series: Vec::new(),
    };
    let inputs = pr::Inputs {
        messages: &messages,
        patches: &patches,
        repro: Some("case  upstream  patched\nTopK  error  66\n".into()),
        bench: None,
        prepared: &prepared,
    };
    let body = pr::body(&inputs);
    for message in &messages {
        assert!(body.contains(&format!("### {}\n\n{}\n", message.subject, message.body)));
    }
    assert!(body.contains("`sample_with_tiny_temperature`"));
    assert!(body.contains("```\ncase  upstream  patched\nTopK  error  66\n```"));
    assert!(body.contains("| `examples/x.rs:7` | maps temperature <= 0 to `ArgMax` itself |"));
    assert!(body.contains("`cargo bench`, then `cargo xtask bench-report --callgrind`"));
    assert!(body.contains("- Base line.\n"));
    Ok(())
}

#[test]
fn call_sites_are_classified() {
    let text = "\
fn a(sampling: Sampling) { let p = LogitsProcessor::from_sampling(1, sampling); }
let sampling = Sampling::TopK { k, temperature };
let p = LogitsProcessor::from_sampling(2, sampling);
";
    let sites = pr::sites_in("x.rs", text);
    let guards: Vec<&str> = sites.iter().map(|s| s.guard).collect();
    assert_eq!(guards, [pr::ELSEWHERE, pr::NO_GUARD]);
    assert_eq!(sites[1].line, 3);
}

#[test]
fn the_repro_table_is_named_for_reviewers() {
    let output = "running on the committed fixture\n\nargmax     66 \"R\"\n\nseed 42: each row samples one token\n\
case  upstream (published)  patched (+ patches/)\n\
----  --------------------  --------------------\n\
TopK  error: rand           66 \"R\"\n\nfixture    the committed logits differ by 0\n";
    assert_eq!(
        pr::table_for_reviewers(output).unwrap(),
        "case  before (0.11.1)       after this PR\n\
         ----  --------------------  --------------------\n\
         TopK  error: rand           66 \"R\"\n"
    );
    assert_eq!(pr::table_for_reviewers("no table here\n"), None);
}
