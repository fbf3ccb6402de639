//! `cargo xtask format-patch`: a branch's commits back into `patches/`, after review.

use std::path::PathBuf;

use anyhow::{bail, ensure, Context, Result};

use crate::fsutil::{swap_in, temp_in};
use crate::git;
use crate::project::Layout;
use crate::series;

#[derive(Debug, clap::Args)]
pub struct Options {
    /// The clone of candle that holds the branch.
    #[arg(long, value_name = "CLONE")]
    pub candle: PathBuf,
    /// The branch whose commits become patches/.
    #[arg(long, value_name = "NAME")]
    pub branch: String,
    /// Where the branch starts.
    #[arg(long, default_value = "main")]
    pub base: String,
}

pub fn run(layout: &Layout, options: &Options) -> Result<()> {
    let (candle, branch, base) = (&options.candle, &options.branch, &options.base);
    // `patches/` is rewritten whole: refuse while it holds changes that are not committed.
    let root = layout.root.display();
    let workspace = git2::Repository::discover(&layout.root).with_context(|| {
        format!("{root} is not in a git repository: patches/ would be overwritten with no way back")
    })?;
    let workdir = workspace.workdir();
    let workdir = workdir.context("the workspace's repository is bare")?;
    let patches = layout.patches();
    let relative = patches.strip_prefix(workdir.canonicalize()?);
    let relative = relative.or_else(|_| patches.strip_prefix(workdir))?;
    let changed = git::uncommitted(&workspace, Some(&format!("{}/", relative.display())))?;
    ensure!(
        changed.is_empty(),
        "patches/ has changes that are not committed ({}): commit or stash them first, since \
         format-patch rewrites the folder",
        changed.join(", ")
    );

    let repo = git::open(candle)?;
    let mut walk = repo.revwalk()?;
    walk.push(git::resolve(&repo, branch)?)?;
    walk.hide(git::resolve(&repo, base)?)?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
    let commits = walk.collect::<Result<Vec<_>, _>>()?;
    if commits.is_empty() {
        bail!("`{branch}` has no commits that `{base}` does not have");
    }
    // The new folder: every patch, and whatever else `patches/` holds (the pin).
    let temp = temp_in(&layout.root, "format-patch")?;
    let new = temp.path().join("patches");
    std::fs::create_dir(&new)?;
    let listing = std::fs::read_dir(&patches);
    for entry in listing.with_context(|| format!("cannot read {}", patches.display()))? {
        let entry = entry?;
        if !entry.file_name().to_string_lossy().ends_with(".patch") {
            std::fs::copy(entry.path(), new.join(entry.file_name()))?;
        }
    }
    let mut written = Vec::new();
    for (index, id) in commits.iter().enumerate() {
        let commit = repo.find_commit(*id)?;
        if commit.parent_count() != 1 {
            bail!("{id} is a merge: rebase the branch onto its base first");
        }
        let subject = commit.summary()?.unwrap_or_default();
        let name = series::file_name(index + 1, subject);
        std::fs::write(new.join(&name), series::email(&commit)?)?;
        let short = git::short(&id.to_string()).to_string();
        written.push(format!("[format-patch] {name} <- {short} {subject}\n"));
    }
    swap_in(&[(new, patches)])?;
    eprint!("{}", written.concat());
    eprintln!("now run `cargo xtask vendor`, then `cargo xtask check`");
    Ok(())
}
