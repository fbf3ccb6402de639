//! `cargo xtask pr`: one upstream pull request per patch, as a stack of branches in a clone.

pub mod audit;
pub mod base;
mod clone;
pub mod facts;
pub mod render;
pub mod stack;
pub mod summary;
pub mod verify;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, ensure, Context, Result};
use fs_err as fs;
use git2::{Oid, Repository};

use crate::fsutil::{swap_in, temp_in};
use crate::git;
use crate::pin::{self, Pin};
use crate::project::Layout;
use crate::published::{self, Published};
use crate::series::{self, Patch, Series};
use crate::{expected, metal, resolutions, trees};

pub use clone::prepare;
use stack::Entry;
use verify::Check;

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

/// The branch of each patch, checked for validity and clashes before anything is made.
pub fn branch_names(prefix: &str, patches: &[Patch]) -> Result<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    for patch in patches {
        let name = stack::branch_name(prefix, &patch.message()?);
        if !git2::Branch::name_is_valid(&name)? {
            bail!("`{name}` is not a valid branch name (check --prefix)");
        }
        if names.contains(&name) {
            bail!("two patches would both get branch `{name}`: give them different subjects");
        }
        names.push(name);
    }
    Ok(names)
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

#[derive(Debug)]
pub struct Prepared {
    pub stack: Vec<Entry>,
    /// The patches the base holds already, merged upstream: no branch is made for them.
    pub landed: Vec<stack::Landed>,
    /// The patches that conflict with the base, and those that build on them: no branch is made
    /// or moved for them.
    pub stopped: Vec<crate::branches::Stopped>,
    /// The other bases' pull requests that the base has, with the resolutions `pr` took for them.
    pub rewrites: Vec<crate::resolutions::Resolutions>,
    pub base: base::BaseReport,
    pub call_sites: Vec<audit::CallSite>,
}

impl Options {
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
    make(layout, options, &published, &mut std::io::stderr())
}

/// `run` on the published crates `published`, which the patches apply to, with its summary
/// written to `console`.
pub fn make(
    layout: &Layout,
    options: &Options,
    published: &[Published],
    console: &mut dyn Write,
) -> Result<()> {
    options.validate()?;
    if options.verify {
        // Before any branch is made: the Metal check needs what a fresh machine may lack.
        metal::preflight(true)?;
    }
    let all = Series::load(&layout.patches())?;
    // A carried patch gets no branch (`Selection::linear`).
    let linear = select(all.patches.clone(), &options.patches)?;
    let (patches, carried) = all.stack.split_carried(linear.clone());
    ensure!(!patches.is_empty(), "patches/ holds no patch to propose");
    let carried = summary::carried(&carried, &all.stack.carried)?;
    let series = Selection {
        branches: branch_names(&options.prefix, &patches)?,
        patches,
        linear,
        series_branch: options.series_branch.clone(),
        series: all,
    };
    let pins: Vec<Pin> = published.iter().map(|p| p.pin.clone()).collect();
    let author = options.author.as_deref();
    let (repo, built, base, call_sites) = match &options.candle {
        Some(clone) => {
            let repo = git::open(clone)?;
            let existing = match (options.force_branch, options.discard_commits) {
                (false, _) => Existing::Refuse,
                (true, false) => Existing::Move,
                (true, true) => Existing::MoveDroppingCommits,
            };
            let contributor = contributor(&repo, author)?;
            let base = &options.base;
            // A candidate taken after the first for its patch must build on the base.
            let check_dir = layout.target().join("pr-build-check");
            let builds = |patch: &Patch, base: Oid, tree: Oid| {
                verify::builds(&repo, base, tree, &check_dir, &patch.file_name)
            };
            let prepared = prepare(
                &repo,
                published,
                &series,
                base,
                &contributor,
                existing,
                &builds,
            )?;
            let built = stack::Built {
                entries: prepared.stack,
                landed: prepared.landed,
                stopped: prepared.stopped,
                rewrites: prepared.rewrites,
            };
            (repo, built, Some(prepared.base), Some(prepared.call_sites))
        }
        // For review without a clone: nothing is written anywhere but `target/pr/`, and the
        // workspace's git identity stands in for the clone's.
        None => {
            let contributor = contributor(&Repository::discover(&layout.root)?, author)?;
            let scratch = trees::Scratch::new()?;
            let base = published_commit(&scratch.repo, published, &pins)?;
            // The published crates: the first candidate for each patch, the patch, goes on.
            let built = stack::build(
                &scratch.repo,
                base,
                &series,
                &contributor,
                &[],
                &|_, _, _| Ok(true),
            )?;
            (scratch.repo, built, None, None)
        }
    };
    let stack = &built.entries;
    let shown = |adds_only: bool| -> Vec<String> {
        let found = built
            .rewrites
            .iter()
            .filter(|r| r.rewrite.adds_only == adds_only);
        found.map(|r| resolutions::shown(&r.name)).collect()
    };
    let notes: Vec<_> = series
        .patches
        .iter()
        .map(|p| series.series.notes_of(p))
        .collect();
    let facts = facts::Facts {
        call_sites,
        real_model: facts::real_model(layout, &notes),
        bench: facts::bench(layout, &series.series),
        rewrites: shown(false),
        adds_only: shown(true),
    };
    let verified = options.verify.then(|| verify_stack(layout, &repo, stack));
    let checks = verified.transpose()?;
    // `target/pr/`, written whole: `<branch>/title.txt`, `body.md` and the patch, and `stack.txt`.
    let target = layout.target();
    let temp = temp_in(&target, "pr")?;
    let new = temp.path().join("pr");
    // Made here, not by the first branch's folder: when every patch has landed there is none.
    fs::create_dir(&new)?;
    for (index, entry) in stack.iter().enumerate() {
        let folder = new.join(&entry.branch);
        fs::create_dir_all(&folder)?;
        let checks = checks.as_ref().map(|all| all[index].as_slice());
        // On a base with another pull request on the same code, the notes written for it.
        let own = series.series.notes_of(&entry.patch);
        let notes = facts::on_base(&own, &built.rewrites, &entry.patch);
        let body = render::body(stack, index, &notes, &facts, &pins, checks)?;
        fs::write(
            folder.join("title.txt"),
            entry.message.subject.clone() + "\n",
        )?;
        fs::write(folder.join("body.md"), body)?;
        // The step's forest plot, for the description; the body is complete without it.
        let parent = entry.parent.map(|p| stack[p].patch.number());
        let number = entry.patch.number();
        crate::bench_report::forest::write_step_png(facts.bench.as_ref(), number, parent, &folder)?;
        let email = series::email(&repo.find_commit(entry.commit)?)?;
        fs::write(folder.join(&entry.patch.file_name), email)?;
    }
    // The summary, in stack.txt as on the console, less how the base relates to the pin.
    let (landed, stopped) = (&built.landed, &built.stopped);
    let summary = |base| -> Result<String> {
        let order = summary::console(stack, stopped, base, &pins);
        let rewrites = summary::rewrites(&built.rewrites);
        let stopped = summary::stopped(stopped)?;
        Ok(summary::landed(landed) + &rewrites + &order + &carried + &stopped)
    };
    fs::write(new.join("stack.txt"), summary(None)?)?;
    let out = target.join("pr");
    swap_in(&[(new, out.clone())])?;
    write!(console, "{}", summary(base.as_ref())?)?;
    let next = summary::next_steps(options, stack, stopped, &out, &facts);
    write!(console, "{next}")?;
    // Only now, with every branch that applies made and written out: a conflict stops one
    // branch, not the stack.
    let failed = checks.and_then(|checks| summary::failed(stack, &checks));
    let problems: Vec<String> = summary::conflicts(stopped)
        .into_iter()
        .chain(failed)
        .collect();
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

/// What `pr` makes from the series: the selected patches to propose, with their branches.
pub struct Selection {
    /// All of `patches/`, selected or not: the blobs its patches give on the published crates
    /// are what a three-way merge of any of them starts from.
    pub series: Series,
    pub patches: Vec<Patch>,
    /// The branch of each of `patches`, in the same order.
    pub branches: Vec<String>,
    /// Every selected patch in series order, the carried ones too, which get no branch but stay
    /// under the patches after them, as the series was written.
    pub linear: Vec<Patch>,
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

/// A commit holding the published crates at their paths in candle's repository.
fn published_commit(repo: &Repository, published: &[Published], pins: &[Pin]) -> Result<Oid> {
    let tree = repo.find_tree(expected::published_tree(repo, published)?)?;
    let time = git2::Time::new(0, 0);
    let signature = git2::Signature::new("published", "published@crates.io", &time)?;
    let message = format!("{} as published", pin::label(pins));
    Ok(repo.commit(None, &signature, &signature, &message, &tree, &[])?)
}

/// Runs candle's CI commands on each branch, in one export that follows the stack.
fn verify_stack(layout: &Layout, repo: &Repository, stack: &[Entry]) -> Result<Vec<Vec<Check>>> {
    let dir = layout.target().join("pr-verify");
    let (export, record) = (dir.join("candle"), dir.join("exported-tree"));
    // The tree the export holds from an earlier run, if this clone has it.
    let mut previous: Option<Oid> = fs::read_to_string(&record)
        .ok()
        .and_then(|id| Oid::from_str(id.trim()).ok())
        .filter(|id| repo.find_tree(*id).is_ok());
    let mut all = Vec::new();
    for (index, entry) in stack.iter().enumerate() {
        let commit = repo.find_commit(entry.commit)?;
        let tree = commit.tree_id();
        // Forget the record first: an export cut short leaves a folder that matches no tree.
        let _ = fs::remove_file(&record);
        verify::export(repo, previous, tree, &export)?;
        fs::write(&record, tree.to_string())?;
        previous = Some(tree);
        let crates = verify::crates(repo, commit.parent(0)?.tree_id(), tree, &export)?;
        let (touched, mut dependents) = (crates.touched.join(", "), crates.dependents.join(", "));
        if dependents.is_empty() {
            dependents = "no dependents".into();
        }
        let commands = verify::commands(&crates);
        eprintln!(
            "verify {} ({} of {}): {touched} (and {dependents}): {} commands of candle's CI",
            entry.branch,
            index + 1,
            stack.len(),
            commands.len()
        );
        all.push(verify::run(&export, &dir.join("target"), &commands)?);
    }
    Ok(all)
}
