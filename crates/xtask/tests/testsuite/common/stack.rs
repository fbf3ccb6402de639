//! The three-patch stack that the `pr` tests make, on a clone-like repository.

use std::path::Path;

use anyhow::Result;
use git2::{Oid, Repository};
use tempfile::TempDir;
use xtask::pr::{self, BranchPlan};
use xtask::series::stack_file::StackFile;
use xtask::series::{self, Patch};

use super::*;

pub const MODULE: &str = "candle-transformers/src/generation/mod.rs";
pub const TESTS: &str = "candle-transformers/tests/generation_tests.rs";

/// Three patches as `git format-patch` files: the first raises the greedy threshold, the second
/// changes the line the first wrote (so it needs it), the third adds a test and stands alone.
pub fn stack_patches() -> Result<Vec<Patch>> {
    let emails = make_series(
        &crate_files(),
        vec![
            (
                "generation: Raise the threshold\n\nThe threshold was too low.\n\nIt is now 1e-6.\n",
                Box::new(raise_threshold) as Change,
            ),
            (
                "generation: Raise it again\n\nStill too low.\n\nIt is now 1e-5.\n",
                Box::new(|root: &Path| edit(root, MODULE, NEW_LINE, "if v < 1e-5 { None } else { Some(v) }")),
            ),
            (
                "generation: Test argmax on ties\n\nTies were not tested.\n",
                Box::new(|root: &Path| {
                    let path = root.join(TESTS);
                    let text = std::fs::read_to_string(&path)?;
                    std::fs::write(path, text + "\n#[test]\nfn sample_ties() -> Result<()> {\n    Ok(())\n}\n")?;
                    Ok(())
                }),
            ),
        ],
    )?;
    emails
        .into_iter()
        .enumerate()
        .map(|(index, (name, bytes))| Patch::new(series::file_name(index + 1, &name), bytes))
        .collect()
}

/// A clone-like repository: the published crate under `candle-transformers/` on `main`.
pub fn candle() -> Result<(TempDir, Repository)> {
    let temp = crate::kept::dir("candle")?;
    let repo = upstream_repo(temp.path(), &crate_files())?;
    Ok((temp, repo))
}

/// The series `patches` with their branches, and what `builds_on` names.
pub fn series(
    patches: Vec<Patch>,
    prefix: &str,
    builds_on: &[(&str, &str)],
) -> Result<pr::Selection> {
    let builds_on = builds_on
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()));
    let stack = StackFile {
        builds_on: builds_on.collect(),
        ..StackFile::default()
    };
    Ok(pr::Selection {
        linear: patches.clone(),
        carried: Vec::new(),
        series: xtask::series::Series {
            patches: patches.clone(),
            stack,
            notes: Default::default(),
            resolutions: Vec::new(),
        },
        proposed: pr::proposed(prefix, patches)?,
        series_branch: None,
    })
}

/// `planned`'s branches written into `repo`, as `pr` writes them; `planned` back, to look at.
pub fn made(repo: &Repository, planned: BranchPlan) -> Result<BranchPlan> {
    let writes = planned
        .writes
        .as_ref()
        .expect("a plan in a clone writes branches");
    pr::write_branches(repo, writes)?;
    Ok(planned)
}

pub fn prepare(repo: &Repository, base: &str, force: bool) -> Result<BranchPlan> {
    // The second patch changes the line the first wrote.
    let series = series(stack_patches()?, "", &[("0002", "0001")])?;
    let contributor = pr::contributor(repo, None)?;
    let existing = match force {
        true => pr::Existing::Move,
        false => pr::Existing::Refuse,
    };
    pr::prepare(
        repo,
        &[published()?],
        &series,
        base,
        &contributor,
        existing,
        &crate::common::stack::no_fallback,
    )
    .and_then(|planned| made(repo, planned))
}

pub fn blob_at(repo: &Repository, commit: Oid, path: &str) -> Result<Vec<u8>> {
    let tree = repo.find_commit(commit)?.tree()?;
    let entry = tree.get_path(Path::new(path))?;
    Ok(repo.find_blob(entry.id())?.content().to_vec())
}

pub fn branch_tip(repo: &Repository, name: &str) -> Result<Oid> {
    let branch = repo.find_branch(name, git2::BranchType::Local)?;
    Ok(branch.get().target().expect("a direct reference"))
}

/// Commits on `main`, and checks out, `tree` with `message`: what GitHub's merge button and a
/// `git pull` leave in a clone.
pub fn commit_on_main(repo: &Repository, tree: Oid, message: &str) -> Result<Oid> {
    let repo = Repository::open(repo.path())?;
    let main = repo.head()?.peel_to_commit()?;
    // At a fixed time, so that the commits' ids, which the summaries show, are the same each run.
    let time = git2::Time::new(1_800_000_000, 0);
    let me = git2::Signature::new("Maintainer", "maintainer@example.com", &time)?;
    let tree = repo.find_tree(tree)?;
    let id = repo.commit(Some("HEAD"), &me, &me, message, &tree, &[&main])?;
    let mut checkout = git2::build::CheckoutBuilder::new();
    repo.checkout_head(Some(checkout.force()))?;
    Ok(id)
}

/// Squash-merges `branch` into `main` as GitHub does: one commit, `Title (#N)`.
pub fn squash_merge(repo: &Repository, branch: &str, title: &str, number: u32) -> Result<Oid> {
    let tip = repo.find_commit(branch_tip(repo, branch)?)?;
    let main = repo.head()?.peel_to_commit()?;
    let ancestor = repo.find_commit(repo.merge_base(main.id(), tip.id())?)?;
    let mut index = repo.merge_trees(&ancestor.tree()?, &main.tree()?, &tip.tree()?, None)?;
    assert!(!index.has_conflicts(), "{branch} merges into main");
    let tree = index.write_tree_to(repo)?;
    commit_on_main(repo, tree, &format!("{title} (#{number})"))
}

/// `main`'s file at `path`, edited by `edit`, committed with `message`.
pub fn change_main(repo: &Repository, path: &str, edit: &dyn Fn(&str) -> String) -> Result<Oid> {
    let main = repo.head()?.peel_to_commit()?;
    let text = String::from_utf8(blob_at(repo, main.id(), path)?)?;
    let mut update = git2::build::TreeUpdateBuilder::new();
    update.upsert(
        path,
        repo.blob(edit(&text).as_bytes())?,
        git2::FileMode::Blob,
    );
    let tree = update.create_updated(repo, &main.tree()?)?;
    commit_on_main(repo, tree, "Another pull request (#3731)")
}

/// A workspace whose `patches/` holds the three-patch stack, 0002 building on 0001.
pub fn stack_workspace() -> Result<Workspace> {
    let ws = workspace()?;
    for patch in stack_patches()? {
        ws.add_patch(&patch.file_name, &patch.bytes)?;
    }
    let stack_toml = ws.layout.patches().join("stack.toml");
    std::fs::write(stack_toml, "[builds-on]\n\"0002\" = \"0001\"\n")?;
    Ok(ws)
}

/// `cargo xtask pr --candle <clone> --force-branch` in `ws`: what it printed, with the
/// workspace's and the clone's folders written `<workspace>` and `<clone>`, and how it ended.
pub fn run_pr(ws: &Workspace, repo: &Repository) -> Result<(String, Result<pr::plan::Written>)> {
    // Without the trailing `/` of `workdir`, as a user names a folder.
    let clone = repo.workdir().expect("a clone with a work tree");
    let clone = std::path::PathBuf::from(clone.display().to_string().trim_end_matches('/'));
    let options = pr::Options {
        candle: Some(clone.clone()),
        base: "main".to_string(),
        force_branch: true,
        ..pr::Options::default()
    };
    let published = [ws.published.clone()];
    let made = pr::make(&ws.layout, &options, &published);
    let console = made
        .as_ref()
        .map_or(String::new(), |written| written.to_string());
    // As `pr::run` ends: with the problems, once everything is written.
    let result = made.and_then(|written| written.ended().map(|()| written));
    let console = console.replace(&ws.layout.root.display().to_string(), "<workspace>");
    let console = console.replace(&clone.display().to_string(), "<clone>");
    Ok((console, result))
}

/// The build check of a `prepare` whose every patch goes on as its first candidate: asked at
/// all, it fails, naming the patch.
pub fn no_fallback(patch: &xtask::series::Patch, _: git2::Oid, _: git2::Oid) -> Result<bool> {
    anyhow::bail!(
        "{} was taken in place of its first candidate",
        patch.file_name
    )
}
