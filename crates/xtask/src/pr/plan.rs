//! `pr` as a plan, then a write. `plan` builds every branch in the clone's object store in
//! memory and renders every file of `target/pr/`: it writes nothing the contributor keeps, only
//! what its checks build in `target/` (`pr-build-check/`, `pr-verify/`, `cargo repro`). `write`
//! then makes the branches in the clone and swaps `target/pr/` in whole, and says what it wrote.

use std::path::PathBuf;

use anyhow::Result;
use fs_err as fs;
use git2::{Oid, Repository};

use super::clone::{self, BranchPlan, Writes};
use super::stack::{self, Entry};
use super::summary::{Next, Summary};
use super::verify::{self, Check};
use super::{contributor, facts, render, Options, Selection};
use crate::fsutil::{swap_in, temp_in};
use crate::git;
use crate::pin::{self, Pin};
use crate::project::Layout;
use crate::published::Published;
use crate::report::PNG;
use crate::series::resolutions;
use crate::series::{self, Patch};
use crate::{expected, trees};

/// What `pr` will write, whole, before any of it is written.
pub struct Plan {
    /// Where the branches were built, which holds the plan's commits: the clone, or a scratch
    /// repository.
    repo: Repository,
    /// The branches to write into the clone; none without one.
    writes: Option<Writes>,
    /// `target/pr/`: each branch's folder, in stack order, and `stack.txt`.
    pub folders: Vec<Folder>,
    /// `stack.txt` and the console.
    pub summary: Summary,
}

/// A branch's folder of `target/pr/`: its title, body, patch and picture, by file name.
pub struct Folder {
    pub branch: String,
    pub files: Vec<(String, Vec<u8>)>,
}

/// What `write` wrote: the branches made in the clone, and the folder `target/pr/`; with the
/// summary, which the console shows (`Display`), and whose problems `pr` ends with (`ended`).
#[derive(Debug)]
pub struct Written {
    pub branches: Vec<String>,
    pub out: PathBuf,
    pub summary: Summary,
}

impl Written {
    /// Fails with the conflicts and failed checks, once every branch that applies is made and
    /// written out: a conflict stops one branch, not the stack.
    pub fn ended(&self) -> Result<()> {
        let problems = self.summary.problems();
        anyhow::ensure!(problems.is_empty(), "{}", problems.join("\n"));
        Ok(())
    }
}

impl std::fmt::Display for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.summary)
    }
}

/// The plan of `pr` with `options` for `series`, on the published crates `published`.
pub fn plan(
    layout: &Layout,
    options: &Options,
    published: &[Published],
    selection: &Selection,
) -> Result<Plan> {
    let pins: Vec<Pin> = published.iter().map(|p| p.pin.clone()).collect();
    let (repo, planned) = stack_in(layout, options, published, selection, &pins)?;
    let BranchPlan {
        built,
        call_sites,
        writes,
    } = planned;
    let stack = &built.stack;
    let shown = |adds_only: bool| -> Vec<String> {
        let found = built
            .rewrites
            .iter()
            .filter(|r| r.rewrite.adds_only == adds_only);
        found.map(|r| resolutions::shown(&r.name)).collect()
    };
    let notes: Vec<_> = selection
        .proposed
        .iter()
        .map(|p| selection.series.notes_of(&p.patch))
        .collect();
    // What could not be measured is said with the summary; the bodies say only that it is missing.
    let mut warnings = Vec::new();
    let real_model = facts::real_model(layout, &notes).unwrap_or_else(|err| {
        warnings.push(format!("{err:#}: no real-model rows"));
        None
    });
    let (bench, said) = facts::bench(layout, &selection.series);
    warnings.extend(said);
    let facts = facts::Facts {
        call_sites,
        real_model,
        bench,
        rewrites: shown(false),
        adds_only: shown(true),
    };
    // The checks run on the planned commits, which the clone's object store holds in memory.
    let verified = options.verify.then(|| verify_stack(layout, &repo, stack));
    let checks = verified.transpose()?;
    // `target/pr/`: `<branch>/title.txt`, `body.md`, the patch and the picture, and `stack.txt`.
    let inputs = Inputs {
        repo: &repo,
        built: &built,
        selection,
        facts: &facts,
        pins: &pins,
    };
    let mut folders = Vec::new();
    for index in 0..stack.len() {
        let checks = checks.as_ref().map(|all| all[index].as_slice());
        folders.push(folder(&inputs, index, checks)?);
    }
    let pictures = folders
        .iter()
        .any(|f| f.files.iter().any(|(name, _)| name == PNG));
    let summary = Summary {
        warnings,
        carried: selection.carried.clone(),
        why_carried: selection.series.stack.carried.clone(),
        checks,
        next: Next {
            clone: (options.candle.as_ref()).map(|clone| clone.display().to_string()),
            series: options.series_branch.clone(),
            out: layout.target().join("pr"),
            pictures,
            bench: facts.bench.is_some(),
            verify: options.verify,
        },
        built,
    };
    Ok(Plan {
        summary,
        folders,
        repo,
        writes,
    })
}

/// The stack's branches, planned: in the clone (`--candle`), with what to write there, or for
/// review without one in a scratch repository on the published crates, with nothing to write.
/// Returns the repository that holds the planned commits.
fn stack_in(
    layout: &Layout,
    options: &Options,
    published: &[Published],
    selection: &Selection,
    pins: &[Pin],
) -> Result<(Repository, BranchPlan)> {
    let author = options.author.as_deref();
    let Some(clone) = &options.candle else {
        // The workspace's git identity stands in for the clone's.
        let contributor = contributor(&Repository::discover(&layout.root)?, author)?;
        let scratch = trees::scratch()?;
        let base = published_commit(&scratch, published, pins)?;
        // The published crates: the first candidate for each patch, the patch, goes on.
        let no_check = |_: &Patch, _, _| Ok(true);
        let built = stack::build(&scratch, base, selection, &contributor, &[], &no_check)?;
        let planned = BranchPlan {
            built,
            call_sites: None,
            writes: None,
        };
        return Ok((scratch, planned));
    };
    let repo = git::open(clone)?;
    let contributor = contributor(&repo, author)?;
    // A candidate taken after the first for its patch must build on the base.
    let check_dir = layout.target().join("pr-build-check");
    let builds = |patch: &Patch, base: Oid, tree: Oid| {
        verify::builds(&repo, base, tree, &check_dir, &patch.file_name)
    };
    let base = &options.base;
    let planned = clone::prepare(
        &repo,
        published,
        selection,
        base,
        &contributor,
        options.existing(),
        &builds,
    )?;
    Ok((repo, planned))
}

/// What every branch's folder is made from.
struct Inputs<'a> {
    repo: &'a Repository,
    built: &'a stack::Built,
    selection: &'a Selection,
    facts: &'a facts::Facts,
    pins: &'a [Pin],
}

/// The folder of `target/pr/` for the stack's branch `index`: its title, body, picture and patch.
fn folder(inputs: &Inputs<'_>, index: usize, checks: Option<&[Check]>) -> Result<Folder> {
    let (stack, entry) = (&inputs.built.stack, &inputs.built.stack[index]);
    // On a base with another pull request on the same code, the notes written for it.
    let own = inputs.selection.series.notes_of(&entry.patch);
    let notes = facts::on_base(own, &inputs.built.rewrites, &entry.patch);
    let body = render::body(stack, index, &notes, inputs.facts, inputs.pins, checks)?;
    let title = format!("{}\n", entry.patch.message.subject);
    let mut files = vec![
        ("title.txt".to_string(), title.into_bytes()),
        ("body.md".to_string(), body.into_bytes()),
    ];
    // The step's forest plot, for the description; the body is complete without it.
    let parent = entry.parent.map(|p| stack[p].patch.number());
    let number = entry.patch.number();
    let png = crate::report::step_png(inputs.facts.bench.as_ref(), number, parent)?;
    files.extend(png.map(|png| (PNG.to_string(), png)));
    let email = series::email(&inputs.repo.find_commit(entry.commit)?)?;
    files.push((entry.patch.file_name.clone(), email));
    let branch = entry.branch.clone();
    Ok(Folder { branch, files })
}

/// Writes `plan`: `target/pr/` aside, its branches into the clone, then `target/pr/` in place.
pub fn write(layout: &Layout, plan: Plan) -> Result<Written> {
    // `target/pr/` is built aside first: a failure there leaves the clone as it was.
    let out = plan.summary.next.out.clone();
    let temp = temp_in(&layout.target(), "pr")?;
    let new = temp.path().join("pr");
    // Made here, not by the first branch's folder: when every patch has landed there is none.
    fs::create_dir(&new)?;
    for Folder { branch, files } in &plan.folders {
        let folder = new.join(branch);
        fs::create_dir_all(&folder)?;
        for (name, bytes) in files {
            fs::write(folder.join(name), bytes)?;
        }
    }
    fs::write(new.join("stack.txt"), plan.summary.text())?;
    let branches = match &plan.writes {
        Some(writes) => clone::write_branches(&plan.repo, writes)?,
        None => Vec::new(),
    };
    swap_in(&[(new, out.clone())])?;
    Ok(Written {
        branches,
        out,
        summary: plan.summary,
    })
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
