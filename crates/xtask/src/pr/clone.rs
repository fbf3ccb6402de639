//! Making the stack's branches in a clone of candle.

use anyhow::{bail, ensure, Context, Result};
use git2::{Oid, Repository};

use super::{audit, stack, Existing, Selection};
use crate::git::{self, short};
use crate::published::Published;
use crate::record::{self, Made};

/// The stack's branches, planned: every check made and every commit built in an object store in
/// memory (the clone's, or without one a scratch repository's), nothing written.
/// `write_branches` writes them into a clone.
#[derive(Debug)]
pub struct BranchPlan {
    /// The branches, the patches the base holds already, those that get no branch, and the
    /// other bases' pull requests that the base has.
    pub built: stack::Built,
    /// Only in a clone of candle: its `from_sampling` call sites, and what to write there.
    pub call_sites: Option<Vec<audit::CallSite>>,
    pub writes: Option<Writes>,
}

/// What `write_branches` writes into the clone: each branch with what the clone's record says of
/// it.
#[derive(Debug)]
pub struct Writes {
    branches: Vec<(String, Made)>,
    record: record::Record,
    force: bool,
}

/// Plans the stack's branches in `repo`, writing nothing: its commits go to an in-memory object
/// store of the clone, which the clone's other readers (`verify`) see until `write_branches`
/// copies them.
pub fn prepare(
    repo: &Repository,
    published: &[Published],
    selection: &Selection,
    base_name: &str,
    contributor: &git2::Signature<'_>,
    existing: Existing,
    builds: stack::BuildCheck<'_>,
) -> Result<BranchPlan> {
    let clone = git::show(repo);
    git::require_clean(
        repo,
        "commit or stash them first; pr never touches the work tree, but prepares nothing from a \
         clone in that state",
    )?;
    let base = resolve_base(repo, base_name, &clone)?;
    let record = record::read(repo)?;
    let branches = selection.proposed.iter().map(|p| &p.branch);
    for branch in branches.chain(&selection.series_branch) {
        may_move(repo, &record, branch, base, existing)?;
    }
    // Objects go to an in-memory backend first: a patch that fails writes nothing.
    repo.odb()?.add_new_mempack_backend(1000)?;
    let id = base.to_string();
    let at = format!("on `{base_name}` ({}); {clone} is as it was", short(&id));
    // The blobs the series gives on the published crates, which its index lines name: a patch
    // whose context moved on the base merges three ways from them.
    let published_tree = crate::expected::published_tree(repo, published)?;
    let known = crate::apply::blobs(repo, published_tree, &selection.series.patches)?;
    let built = stack::build(repo, base, selection, contributor, &known, builds).context(at)?;
    // A series branch is written back whole into patches/, never into a resolution.
    let resolved = built.rewrites.iter().find(|r| !r.patches.is_empty());
    if let (Some(name), Some(resolved)) = (&selection.series_branch, resolved) {
        bail!(
            "--series-branch {name}: the base has {} ({}), so some patches go on as their \
             resolutions in patches/on-{}/, and a branch of the whole series would hold those; \
             make it on a base without it",
            crate::series::resolutions::shown(&resolved.name),
            resolved.rewrite.why,
            resolved.name
        );
    }
    let call_sites = audit::audit(repo, base)?;
    // Each branch to make: its name, the patch it proposes, the rewrite whose resolution it holds
    // and its tip.
    let branches = built.stack.iter().map(|entry| {
        let patch = Some(entry.patch.number().to_string());
        (&entry.branch, patch, entry.rewrite.clone(), entry.commit)
    });
    // The series branch holds every patch: with one that conflicts, it is not made.
    let whole = match &selection.series_branch {
        Some(name) if built.stopped.is_empty() => {
            let tip = stack::series_commits(repo, base, selection, contributor, &known)?;
            Some((name, None, None, tip))
        }
        _ => None,
    };
    let branches = branches.chain(whole).map(|(name, patch, rewrite, tip)| {
        let made = Made {
            patch,
            rewrite,
            tip,
            written: None,
        };
        (name.clone(), made)
    });
    let writes = Writes {
        branches: branches.collect(),
        record,
        force: existing != Existing::Refuse,
    };
    Ok(BranchPlan {
        built,
        call_sites: Some(call_sites),
        writes: Some(writes),
    })
}

/// Fails unless `pr` may make or move `branch` in `repo`, as `existing` says: never the branch
/// checked out, and never one that holds a commit `pr` did not make unless told to drop it.
fn may_move(
    repo: &Repository,
    record: &record::Record,
    branch: &str,
    base: Oid,
    existing: Existing,
) -> Result<()> {
    let clone = git::show(repo);
    let found = repo.find_branch(branch, git2::BranchType::Local);
    ensure!(
        !found.as_ref().is_ok_and(|b| b.is_head()),
        "branch `{branch}` is checked out in {clone}: pr will not move it; check out another \
         branch there, or choose other names with --prefix"
    );
    ensure!(
        found.is_err() || existing != Existing::Refuse,
        "branch `{branch}` already exists in {clone}: choose other names with --prefix, or \
         replace the branches with --force-branch"
    );
    // A commit made by hand, a reviewer's fix, is lost when its branch moves.
    let hand_made = record::hand_made(repo, record, branch, base)?;
    if hand_made.is_empty() || existing == Existing::MoveDroppingCommits {
        return Ok(());
    }
    let list = hand_made
        .iter()
        .map(|(id, subject)| format!("\n    {} {subject}", short(&id.to_string())));
    let (commits, them) = match hand_made.len() {
        1 => ("1 commit".to_string(), "it"),
        n => (format!("{n} commits"), "them"),
    };
    bail!(
        "branch `{branch}` holds {commits} that pr did not make:{}\nwrite {them} back into \
         patches/ first (`cargo xtask format-patch --candle {clone} --branch {branch}`), or \
         pass --discard-commits to move the branch all the same; {clone} is as it was",
        list.collect::<String>(),
    );
}

/// Writes the branches of `planned` into the clone, with their objects and its record. Returns
/// the branches written.
pub fn write_branches(repo: &Repository, planned: &Writes) -> Result<Vec<String>> {
    // Not the whole in-memory store: its dump packs every tree and blob the commits reach.
    let on_disk = Repository::open(repo.path())?;
    let disk = on_disk.odb()?;
    for (_, made) in &planned.branches {
        write_missing(repo, &disk, made.tip)?;
    }
    let mut record = planned.record.clone();
    for (name, made) in &planned.branches {
        on_disk.branch(name, &on_disk.find_commit(made.tip)?, planned.force)?;
        record.branches.insert(name.clone(), made.clone());
    }
    record::write(&on_disk, &record)?;
    Ok(planned
        .branches
        .iter()
        .map(|(name, _)| name.clone())
        .collect())
}

/// Copies object `id` and what it refers to into `disk`, children first, skipping what it has.
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

/// The commit of the local or remote-tracking (`origin/main`) branch `name`, never a tag.
fn resolve_base(repo: &Repository, name: &str, clone: &str) -> Result<Oid> {
    for reference in [format!("refs/heads/{name}"), format!("refs/remotes/{name}")] {
        if let Ok(reference) = repo.find_reference(&reference) {
            return Ok(reference.peel_to_commit()?.id());
        }
    }
    ensure!(
        repo.revparse_single(name).is_err(),
        "`{name}` is not a branch of {clone} (a commit or a tag): name the branch the pull request \
         goes to, or make one there with `git branch <name> {name}`"
    );
    bail!(
        "{clone} has no branch `{name}`: fetch it (`git fetch origin {name}`), or name another with --base"
    )
}
