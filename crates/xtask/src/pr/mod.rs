//! `cargo xtask pr [--candle <clone>] [--base main] [--prefix P] [--force-branch]
//! [--patches 0001,0002] [--verify]`: the upstream pull requests, one per patch, as a stack.
//! With a clone of candle it makes one branch per patch there, without touching the work tree
//! or the current branch; in every case it writes `target/pr/<branch>/` for each: the title, the
//! body in Markdown and the patch, `git am`-able.

pub mod audit;
pub mod base;
pub mod notes;
pub mod overlap;
pub mod render;
pub mod stack;
pub mod verify;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};

use crate::fsutil::{swap_in, TempDir};
use crate::git::{self, short};
use crate::pin::Pin;
use crate::project::{self, Layout};
use crate::published::{self, Published};
use crate::series::{self, Patch};
use crate::{bench_report, metal, trees};

use render::{Facts, RealModel};
use stack::Stack;

/// The flags of `cargo xtask pr`, checked by `validate` before any work starts.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub candle: Option<PathBuf>,
    pub base: String,
    /// Put before every branch name, as in `sampler/`.
    pub prefix: String,
    pub force_branch: bool,
    pub verify: bool,
    /// Patch numbers ("0001"); all when empty.
    pub patches: Vec<String>,
}

impl Options {
    pub fn validate(&self) -> Result<()> {
        if self.verify && self.candle.is_none() {
            bail!("--verify needs --candle <clone>: the checks run on the branches made there");
        }
        if let Some(clone) = &self.candle {
            if !clone.is_dir() {
                bail!("--candle {}: no such folder", clone.display());
            }
        }
        if self.base.is_empty() {
            bail!("--base needs a branch name");
        }
        for number in &self.patches {
            if number.len() != 4 || !number.bytes().all(|b| b.is_ascii_digit()) {
                bail!("--patches takes four-digit numbers separated by commas, got `{number}`");
            }
        }
        Ok(())
    }
}

/// The patches of `patches/` that `numbers` names, all if it is empty.
pub fn select(patches: Vec<Patch>, numbers: &[String]) -> Result<Vec<Patch>> {
    if numbers.is_empty() {
        return Ok(patches);
    }
    let mut selected = Vec::new();
    for number in numbers {
        let found = patches
            .iter()
            .find(|p| p.file_name.starts_with(&format!("{number}-")));
        selected.push(
            found
                .with_context(|| format!("no patch numbered {number} in patches/"))?
                .clone(),
        );
    }
    selected.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    selected.dedup_by(|a, b| a.file_name == b.file_name);
    Ok(selected)
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

/// What `prepare` made and found in a clone.
#[derive(Debug)]
pub struct Prepared {
    pub stack: Stack,
    pub base: base::BaseReport,
    pub overlaps: overlap::Overlaps,
    pub call_sites: Vec<audit::CallSite>,
}

pub fn run(layout: &Layout, options: &Options) -> Result<()> {
    options.validate()?;
    if options.verify {
        // Before any branch is made: the Metal check needs what a fresh machine may lack.
        metal::preflight(true)?;
    }
    let patches = select(series::load(&layout.patches())?, &options.patches)?;
    if patches.is_empty() {
        bail!("patches/ holds no patch");
    }
    notes::check_paired(&layout.patches(), &series::load(&layout.patches())?)?;
    let notes = patches
        .iter()
        .map(|p| notes::load(&layout.patches(), p))
        .collect::<Result<Vec<_>>>()?;
    let branches = branch_names(&options.prefix, &patches)?;
    let pin = Pin::read(&layout.pin())?;
    let published = published::load_or_fetch(layout, &pin)?;

    // Without a clone, the stack is made on the published crate in memory, for review.
    let scratch;
    let (repo, prepared, base_report, overlaps) = match &options.candle {
        Some(clone) => {
            let repo = git::open(clone)?;
            let prepared = prepare(
                &repo,
                &published,
                &patches,
                &options.base,
                &branches,
                options.force_branch,
            )?;
            let Prepared {
                stack,
                base,
                overlaps,
                call_sites,
            } = prepared;
            (repo, (stack, Some(call_sites)), Some(base), overlaps)
        }
        None => {
            scratch = trees::Scratch::new()?;
            let base = published_commit(&scratch.repo, &published)?;
            let stack = stack::build(&scratch.repo, base, &patches, &branches)?;
            let repo = Repository::from_odb(scratch.repo.odb()?)?;
            (repo, (stack, None), None, overlap::Overlaps::default())
        }
    };
    let (stack, call_sites) = prepared;

    let wants = |marker| notes.iter().any(|n| n.markers().any(|m| m == marker));
    let facts = Facts {
        call_sites,
        real_model: if wants(notes::Marker::RealModel) {
            real_model(layout)
        } else {
            None
        },
        bench: std::fs::read_to_string(bench_report::table_path(layout)).ok(),
    };

    let checks = if options.verify {
        Some(verify_stack(layout, &repo, &stack)?)
    } else {
        None
    };
    let out = write_out(
        layout,
        &repo,
        &stack,
        &notes,
        &facts,
        &pin,
        checks.as_deref(),
    )?;
    eprint!(
        "{}",
        render::console(&stack, base_report.as_ref(), &overlaps, &pin)
    );
    match &options.candle {
        Some(clone) => eprintln!(
            "made {} branches in {}; push each with `git -C {} push <your fork> <branch>`",
            stack.entries.len(),
            clone.display(),
            clone.display()
        ),
        None => eprintln!(
            "made the stack on the published crate only: with `--candle <clone>`, pr makes the \
             branches, checks the base and lists the call sites"
        ),
    }
    eprintln!(
        "wrote {} (a folder per branch: title.txt, body.md, the patch)",
        out.display()
    );
    if facts.bench.is_none() && wants(notes::Marker::Bench) {
        eprintln!("no benchmark table: run `cargo bench`, then `cargo xtask bench-report --callgrind`, then pr again");
    }
    if checks.is_none() {
        eprintln!("the bodies have no CI results: run pr again with --verify");
    }
    if let Some(checks) = &checks {
        let failed: Vec<String> = stack
            .entries
            .iter()
            .zip(checks)
            .flat_map(|(entry, checks)| {
                checks
                    .iter()
                    .filter(|c| !c.passed)
                    .map(move |c| format!("{}: {}", entry.branch, c.command()))
            })
            .collect();
        if !failed.is_empty() {
            bail!("--verify failed: {}", failed.join("; "));
        }
    }
    Ok(())
}

/// Makes the stack's branches in `repo`: checks everything first, applies every patch in memory,
/// and only then writes the branches' new objects and the branches. Anything refused or failed
/// leaves `repo` as it was.
pub fn prepare(
    repo: &Repository,
    published: &Published,
    patches: &[Patch],
    base_name: &str,
    branches: &[String],
    force_branch: bool,
) -> Result<Prepared> {
    let clone = git::show(repo);
    let changed = git::uncommitted(repo, None)?;
    if !changed.is_empty() {
        let shown: Vec<&str> = changed.iter().take(5).map(String::as_str).collect();
        bail!(
            "{clone} has changes that are not committed ({}{}): commit or stash them first; pr \
             never touches the work tree, but prepares nothing from a clone in that state",
            shown.join(", "),
            if changed.len() > 5 { ", ..." } else { "" }
        );
    }
    let base = resolve_base(repo, base_name)?;
    for branch in branches {
        check_branch(repo, branch, force_branch)?;
    }
    let touched = touched_files(patches)?;
    let base_report = base::relate(repo, base, published, &touched)?;
    // Objects go to an in-memory backend first: a patch that fails writes nothing.
    let odb = repo.odb()?;
    let memory = odb.add_new_mempack_backend(1000)?;
    let stack = stack::build(repo, base, patches, branches).with_context(|| {
        format!(
            "on `{base_name}` ({}); {clone} is as it was",
            short(&base.to_string())
        )
    })?;
    let overlaps = overlap::find(repo, base, &touched, patches)?;
    let call_sites = audit::audit(repo, base)?;
    // Everything succeeded: write the branches' new objects, then the branches. Not the whole
    // mempack: its dump packs every tree and blob the commits reach, and it also holds what
    // trying the patches on pull requests wrote.
    let on_disk = Repository::open(repo.path())?;
    let disk = on_disk.odb()?;
    for entry in &stack.entries {
        write_missing(repo, &disk, entry.commit)?;
    }
    for entry in &stack.entries {
        let commit = on_disk.find_commit(entry.commit)?;
        on_disk.branch(&entry.branch, &commit, force_branch)?;
    }
    memory.reset()?;
    Ok(Prepared {
        stack,
        base: base_report,
        overlaps,
        call_sites,
    })
}

/// A commit holding the published crate at its path in candle's repository.
fn published_commit(repo: &Repository, published: &Published) -> Result<Oid> {
    let tree = trees::Scratch {
        repo: Repository::from_odb(repo.odb()?)?,
    }
    .tree(&published.pin.path_in_vcs, &published.files)?;
    let signature =
        git2::Signature::new("published", "published@crates.io", &git2::Time::new(0, 0))?;
    Ok(repo.commit(
        None,
        &signature,
        &signature,
        &format!("{} as published", published.pin.label()),
        &repo.find_tree(tree)?,
        &[],
    )?)
}

/// Writes object `id` of `repo` into `disk`, and every object it refers to that `disk` lacks:
/// the new commits, and the trees and blobs along the paths the patches changed. Children go
/// first, so that `disk` never holds an object whose parts it lacks.
fn write_missing(repo: &Repository, disk: &git2::Odb<'_>, id: Oid) -> Result<()> {
    if disk.exists(id) {
        return Ok(());
    }
    let object = repo.find_object(id, None)?;
    if let Some(commit) = object.as_commit() {
        write_missing(repo, disk, commit.tree_id())?;
        for parent in commit.parent_ids() {
            write_missing(repo, disk, parent)?;
        }
    } else if let Some(tree) = object.as_tree() {
        // Submodules' commits are not in this repository.
        for entry in tree.iter().filter(|e| e.filemode() != 0o160000) {
            write_missing(repo, disk, entry.id())?;
        }
    }
    let odb = repo.odb()?;
    let raw = odb.read(id)?;
    disk.write(raw.kind(), raw.data())?;
    Ok(())
}

/// The commit of the branch `name`: local, or remote-tracking (`origin/main`). A commit id or a
/// tag is refused: a pull request is made against a branch.
fn resolve_base(repo: &Repository, name: &str) -> Result<Oid> {
    for reference in [format!("refs/heads/{name}"), format!("refs/remotes/{name}")] {
        if let Ok(reference) = repo.find_reference(&reference) {
            return Ok(reference.peel_to_commit()?.id());
        }
    }
    if repo.revparse_single(name).is_ok() {
        bail!(
            "`{name}` is not a branch of {} (a commit or a tag): name the branch the pull request \
             goes to, or make one there with `git branch <name> {name}`",
            git::show(repo)
        );
    }
    bail!(
        "{} has no branch `{name}`: fetch it (`git fetch origin {name}`), or name another with --base",
        git::show(repo)
    )
}

fn check_branch(repo: &Repository, branch: &str, force: bool) -> Result<()> {
    let Ok(existing) = repo.find_branch(branch, git2::BranchType::Local) else {
        return Ok(());
    };
    if existing.is_head() {
        bail!(
            "branch `{branch}` is checked out in {}: pr will not move it; check out another \
             branch there, or choose other names with --prefix",
            git::show(repo)
        );
    }
    if !force {
        bail!(
            "branch `{branch}` already exists in {}: choose other names with --prefix, or replace \
             the branches with --force-branch",
            git::show(repo)
        );
    }
    Ok(())
}

/// The paths (in candle's repository) that the patches change.
pub fn touched_files(patches: &[Patch]) -> Result<Vec<String>> {
    let mut files = Vec::new();
    for patch in patches {
        for delta in patch.diff()?.deltas() {
            if let Some(path) = delta.new_file().path().or(delta.old_file().path()) {
                let path = path.display().to_string();
                if !files.contains(&path) {
                    files.push(path);
                }
            }
        }
    }
    Ok(files)
}

/// `cargo repro --format json`'s table, or `None` (with the reason on stderr) if it could not run.
fn real_model(layout: &Layout) -> Option<RealModel> {
    let output = project::cargo()
        .current_dir(&layout.root)
        .args(["repro", "--format", "json"])
        .output();
    let output = match output {
        Ok(output) if output.status.success() => output,
        Ok(output) => {
            eprintln!(
                "cargo repro failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
            return None;
        }
        Err(err) => {
            eprintln!("cannot run cargo repro: {err}");
            return None;
        }
    };
    match parse_real_model(&String::from_utf8_lossy(&output.stdout)) {
        Ok(table) => Some(table),
        Err(err) => {
            eprintln!("cargo repro --format json: {err:#}");
            None
        }
    }
}

pub fn parse_real_model(json: &str) -> Result<RealModel> {
    let value: serde_json::Value = serde_json::from_str(json).context("not JSON")?;
    let text = |v: &serde_json::Value, key: &str| -> Result<String> {
        v[key]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("no string `{key}`"))
    };
    let rows = value["rows"]
        .as_array()
        .context("no `rows`")?
        .iter()
        .map(|row| {
            Ok([
                text(row, "case")?,
                text(row, "upstream")?,
                text(row, "patched")?,
            ])
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RealModel {
        model: text(&value, "model")?,
        logits: text(&value, "logits")?,
        prompt: text(&value, "prompt")?,
        seed: value["seed"].as_u64().context("no number `seed`")?,
        rows,
    })
}

/// Runs candle's CI commands on every branch, in one export that follows the stack branch by
/// branch, so that cargo rebuilds only what each changes.
fn verify_stack(
    layout: &Layout,
    repo: &Repository,
    stack: &Stack,
) -> Result<Vec<Vec<verify::Check>>> {
    let dir = layout.target().join("pr-verify");
    let export = dir.join("candle");
    let target_dir = dir.join("target");
    // The tree the export holds from an earlier run, if this clone has it: only what differs
    // from it is written, so cargo keeps what it built then.
    let record = dir.join("exported-tree");
    let mut previous: Option<Oid> = std::fs::read_to_string(&record)
        .ok()
        .and_then(|id| Oid::from_str(id.trim()).ok())
        .filter(|id| repo.find_tree(*id).is_ok());
    let mut all = Vec::new();
    for entry in &stack.entries {
        let commit = repo.find_commit(entry.commit)?;
        let parent_tree = commit.parent(0)?.tree_id();
        let crates = verify::crates(repo, parent_tree, commit.tree_id())?;
        eprintln!(
            "verify {}: {} (and {})",
            entry.branch,
            crates.touched.join(", "),
            if crates.dependents.is_empty() {
                "no dependents".to_string()
            } else {
                crates.dependents.join(", ")
            }
        );
        // Forget the record first: an export cut short leaves a folder that matches no tree.
        let _ = std::fs::remove_file(&record);
        verify::export(repo, previous, commit.tree_id(), &export)?;
        std::fs::write(&record, commit.tree_id().to_string())?;
        previous = Some(commit.tree_id());
        all.push(verify::run(
            &export,
            &target_dir,
            &verify::commands(&crates),
        )?);
    }
    Ok(all)
}

/// `target/pr/`, written whole: `<branch>/title.txt`, `body.md` and the patch, and `stack.txt`.
fn write_out(
    layout: &Layout,
    repo: &Repository,
    stack: &Stack,
    notes: &[notes::Notes],
    facts: &Facts,
    pin: &Pin,
    checks: Option<&[Vec<verify::Check>]>,
) -> Result<PathBuf> {
    let target = layout.target();
    std::fs::create_dir_all(&target)?;
    let temp = TempDir::in_dir(&target, "pr")?;
    let new = temp.path().join("pr");
    for (index, entry) in stack.entries.iter().enumerate() {
        let dir = new.join(&entry.branch);
        std::fs::create_dir_all(&dir)?;
        let checks = checks.map(|all| all[index].as_slice());
        let body = render::body(stack, index, &notes[index], facts, pin, checks);
        std::fs::write(
            dir.join("title.txt"),
            format!("{}\n", render::title(stack, index)),
        )?;
        std::fs::write(dir.join("body.md"), body)?;
        let email = series::email(&repo.find_commit(entry.commit)?)?;
        std::fs::write(dir.join(&entry.patch.file_name), email)?;
    }
    std::fs::write(
        new.join("stack.txt"),
        render::console(stack, None, &overlap::Overlaps::default(), pin),
    )?;
    let out = target.join("pr");
    swap_in(&[(new, out.clone())])?;
    Ok(out)
}
