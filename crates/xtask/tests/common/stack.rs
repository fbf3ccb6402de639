//! The three-patch stack that the `pr` tests make, on a clone-like repository.

use std::path::Path;

use anyhow::Result;
use git2::{Oid, Repository};
use tempfile::TempDir;
use xtask::pr::notes::Notes;
use xtask::pr::{self, Prepared};
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
    Ok(emails
        .into_iter()
        .enumerate()
        .map(|(index, (name, bytes))| Patch {
            file_name: series::file_name(index + 1, &name),
            bytes,
        })
        .collect())
}

/// A clone-like repository: the published crate under `candle-transformers/` on `main`.
pub fn candle() -> Result<(TempDir, Repository)> {
    let temp = crate::kept::dir("candle")?;
    let repo = upstream_repo(temp.path(), &crate_files())?;
    Ok((temp, repo))
}

/// The series `patches` with their branches, and what `builds_on` names.
pub fn series(patches: Vec<Patch>, prefix: &str, builds_on: &[(&str, &str)]) -> Result<pr::Series> {
    Ok(pr::Series {
        branches: pr::branch_names(prefix, &patches)?,
        notes: vec![Notes::default(); patches.len()],
        linear: patches.clone(),
        whole: patches.clone(),
        patches,
        builds_on: builds_on
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
        series_branch: None,
    })
}

pub fn prepare(repo: &Repository, base: &str, force: bool) -> Result<Prepared> {
    // The second patch changes the line the first wrote.
    let series = series(stack_patches()?, "", &[("0002", "0001")])?;
    let contributor = pr::contributor(repo, None)?;
    let existing = match force {
        true => pr::Existing::Move,
        false => pr::Existing::Refuse,
    };
    pr::prepare(repo, &[published()?], &series, base, &contributor, existing)
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
