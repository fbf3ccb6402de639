//! `cargo xtask pr`: one upstream pull request per patch, as a stack of branches in a clone.

pub mod audit;
mod clone;
pub mod facts;
pub mod plan;
pub mod render;
pub mod stack;
pub mod summary;
pub mod verify;

use std::path::PathBuf;

use anyhow::{bail, ensure, Context, Result};
use git2::Repository;

use crate::cross;
use crate::git;
use crate::project::Layout;
use crate::published::{self, Published};
use crate::series::{Patch, Series};

pub use clone::{prepare, write_branches, BranchPlan};

/// The flags of `cargo xtask pr`, checked by `validate` before any work starts.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct Options {
    /// The clone of candle to make one branch per patch in; without it, only target/pr/.
    #[arg(long, value_name = "CLONE")]
    pub candle: Option<PathBuf>,
    /// The branch of the clone that the stack starts from.
    #[arg(long, default_value = "main")]
    pub base: String,
    /// Put before every branch name, as in `sampler/`.
    #[arg(long, default_value = "")]
    pub prefix: String,
    /// Move branches that already exist, instead of refusing to; never one that holds a
    /// commit pr did not make.
    #[arg(long)]
    pub force_branch: bool,
    /// With --force-branch, move branches that hold commits pr did not make, dropping them.
    #[arg(long, requires = "force_branch")]
    pub discard_commits: bool,
    /// Also make a branch NAME holding the whole series, carried patches too, one commit per
    /// patch: `format-patch` writes it back whole.
    #[arg(long, value_name = "NAME")]
    pub series_branch: Option<String>,
    /// The commits' author and committer; the clone's git identity without it.
    #[arg(long, value_name = "NAME <EMAIL>")]
    pub author: Option<String>,
    /// Run candle's CI commands on every branch (needs --candle).
    #[arg(long)]
    pub verify: bool,
    /// Only these patches, by number; all without it.
    #[arg(long, value_name = "0001,...", value_delimiter = ',')]
    pub patches: Vec<String>,
}

/// The patches of `patches/` that `numbers` names, in series order; all if it is empty.
pub fn select(patches: Vec<Patch>, numbers: &[String]) -> Result<Vec<Patch>> {
    let known = |number: &&String| patches.iter().any(|p| p.number() == *number);
    if let Some(number) = numbers.iter().find(|n| !known(n)) {
        bail!("no patch numbered {number} in patches/");
    }
    let named = |p: &Patch| numbers.is_empty() || numbers.iter().any(|n| p.number() == n);
    Ok(patches.into_iter().filter(named).collect())
}

/// A patch `pr` proposes, with the branch it makes for it.
#[derive(Clone, Debug)]
pub struct Proposed {
    pub patch: Patch,
    pub branch: String,
}

/// Each of `patches` with its branch, checked for validity and clashes before anything is made.
pub fn proposed(prefix: &str, patches: Vec<Patch>) -> Result<Vec<Proposed>> {
    let mut proposed: Vec<Proposed> = Vec::new();
    for patch in patches {
        let branch = stack::branch_name(prefix, &patch.message);
        if !git2::Branch::name_is_valid(&branch)? {
            bail!("`{branch}` is not a valid branch name (check --prefix)");
        }
        if proposed.iter().any(|p| p.branch == branch) {
            bail!("two patches would both get branch `{branch}`: give them different subjects");
        }
        proposed.push(Proposed { patch, branch });
    }
    Ok(proposed)
}

/// What `pr` does with a stack branch that already exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    Refuse,
    /// Move it, unless it holds commits that `pr` did not make.
    Move,
    /// Move it, dropping any commit that `pr` did not make.
    MoveDroppingCommits,
}

impl Options {
    /// What `--force-branch` and `--discard-commits` say to do with a branch that exists.
    pub fn existing(&self) -> Existing {
        match (self.force_branch, self.discard_commits) {
            (false, _) => Existing::Refuse,
            (true, false) => Existing::Move,
            (true, true) => Existing::MoveDroppingCommits,
        }
    }

    fn validate(&self) -> Result<()> {
        if self.verify && self.candle.is_none() {
            bail!("--verify needs --candle <clone>: the checks run on the branches made there");
        }
        if let Some(clone) = self.candle.as_ref().filter(|clone| !clone.is_dir()) {
            bail!("--candle {}: no such folder", clone.display());
        }
        if let Some(author) = &self.author {
            parse_author(author)?;
        }
        ensure!(!self.base.is_empty(), "--base needs a branch name");
        if let Some(name) = &self.series_branch {
            ensure!(
                self.candle.is_some(),
                "--series-branch needs --candle <clone>"
            );
            ensure!(
                git2::Branch::name_is_valid(name)?,
                "--series-branch `{name}` is not a valid branch name"
            );
        }
        let four_digits = |n: &&String| n.len() == 4 && n.bytes().all(|b| b.is_ascii_digit());
        if let Some(number) = self.patches.iter().find(|n| !four_digits(n)) {
            bail!("--patches takes four-digit numbers separated by commas, got `{number}`");
        }
        Ok(())
    }
}

pub fn run(layout: &Layout, options: &Options) -> Result<()> {
    // Before anything is fetched: a wrong flag costs nothing.
    options.validate()?;
    let published = published::load_all(layout)?;
    let written = make(layout, options, &published)?;
    eprint!("{written}");
    written.ended()
}

/// `run` on the published crates `published`, which the patches apply to; `options` as `run`
/// checked them. Returns what it wrote, with what to say and what to end with.
pub fn make(layout: &Layout, options: &Options, published: &[Published]) -> Result<plan::Written> {
    if options.verify {
        // Before any branch is made: the Metal check needs what a fresh machine may lack.
        cross::preflight(true)?;
    }
    let all = Series::load(&layout.patches())?;
    // A carried patch gets no branch (`Selection::linear`).
    let linear = select(all.patches.clone(), &options.patches)?;
    let (patches, carried) = all.stack.split_carried(linear.clone());
    ensure!(!patches.is_empty(), "patches/ holds no patch to propose");
    let selection = Selection {
        proposed: proposed(&options.prefix, patches)?,
        linear,
        carried,
        series_branch: options.series_branch.clone(),
        series: all,
    };
    // First the plan: every branch built in the clone's object store in memory, and every file
    // of `target/pr/` rendered. Nothing is written until it is whole.
    let plan = plan::plan(layout, options, published, &selection)?;
    plan::write(layout, plan)
}

/// What `pr` makes from the series: the selected patches to propose, with their branches.
pub struct Selection {
    /// All of `patches/`, selected or not: the blobs its patches give on the published crates
    /// are what a three-way merge of any of them starts from.
    pub series: Series,
    pub proposed: Vec<Proposed>,
    /// Every selected patch in series order, the carried ones too, which get no branch but stay
    /// under the patches after them, as the series was written.
    pub linear: Vec<Patch>,
    /// The selected patches that `[carried]` keeps out of the stack, in series order.
    pub carried: Vec<Patch>,
    /// The branch that holds the whole series, if one is asked for.
    pub series_branch: Option<String>,
}

/// Who the pull requests' commits are by: `--author "Name <email>"`, else `repo`'s git identity.
pub fn contributor(repo: &Repository, author: Option<&str>) -> Result<git2::Signature<'static>> {
    if let Some(author) = author {
        let (name, email) = parse_author(author)?;
        return Ok(git2::Signature::now(name, email)?);
    }
    repo.signature().map_err(|err| {
        let (at, err) = (git::show(repo), err.message());
        anyhow::anyhow!(
            "no git identity in {at} ({err}): set user.name and user.email there, or pass \
             --author \"Name <email>\""
        )
    })
}

fn parse_author(author: &str) -> Result<(&str, &str)> {
    author
        .rsplit_once(" <")
        .and_then(|(name, email)| Some((name.trim(), email.strip_suffix('>')?)))
        .filter(|(name, email)| !name.is_empty() && email.contains('@'))
        .with_context(|| format!("--author must be `Name <email>`, got `{author}`"))
}
