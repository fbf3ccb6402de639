//! The stack: a branch per patch, on the base or on the branch it builds on, made in a clone.

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};

use super::{base, Prepared, Series};
use crate::branches::branches;
use crate::git::{self, short};
use crate::published::Published;
use crate::series::{Message, Patch};

#[derive(Debug)]
pub struct Entry {
    pub patch: Patch,
    pub message: Message,
    pub branch: String,
    /// The entry whose branch this one starts from (to merge first); `None` for the base.
    pub parent: Option<usize>,
    pub commit: Oid,
}

/// "generation: Sample greedily at temperature 0" -> "sample-greedily-at-temperature-0" (40 max).
pub fn branch_name(prefix: &str, message: &Message) -> String {
    let subject = match message.subject.split_once(": ") {
        Some((area, rest)) if !area.contains(' ') => rest,
        _ => &message.subject,
    };
    let subject = subject.replace('\'', "").to_ascii_lowercase();
    // Each word's length with the `-` after it, summed.
    let (mut length, words) = (0, subject.split(|c: char| !c.is_ascii_alphanumeric()));
    let words = words.filter(|w| !w.is_empty()).take_while(|w| {
        length += w.len() + 1;
        length <= 40 + 1
    });
    format!("{prefix}{}", words.collect::<Vec<_>>().join("-"))
}

/// Commits each patch's branch (`branches::branches`) in `repo`, no reference written.
pub fn build(
    repo: &Repository,
    base: Oid,
    series: &Series,
    contributor: &git2::Signature<'_>,
) -> Result<Vec<Entry>> {
    let (patches, base_name) = (&series.patches, base.to_string());
    let tree = repo.find_commit(base)?.tree_id();
    let trees = branches(repo, tree, short(&base_name), patches, &series.builds_on)?;
    let mut entries: Vec<Entry> = Vec::new();
    for ((patch, branch), branch_tree) in patches.iter().zip(&series.branches).zip(trees) {
        let (message, parent) = (patch.message()?, branch_tree.parent);
        // The contributor's identity, at the time the patch records.
        let author = git2::Signature::new(
            contributor.name().unwrap_or_default(),
            contributor.email().unwrap_or_default(),
            &git2::Time::new(message.time.0, message.time.1),
        )?;
        let (text, tree) = (message.text(), repo.find_tree(branch_tree.tree)?);
        let onto = repo.find_commit(parent.map_or(base, |index| entries[index].commit))?;
        let commit = repo.commit(None, &author, contributor, &text, &tree, &[&onto])?;
        entries.push(Entry {
            patch: patch.clone(),
            message,
            branch: branch.clone(),
            parent,
            commit,
        });
    }
    if entries.is_empty() {
        bail!("no patch to make a branch of");
    }
    Ok(entries)
}

/// Makes the stack's branches in `repo`, writing nothing until every check and patch succeeded.
pub fn prepare(
    repo: &Repository,
    published: &[Published],
    series: &Series,
    base_name: &str,
    contributor: &git2::Signature<'_>,
    force_branch: bool,
) -> Result<Prepared> {
    let clone = git::show(repo);
    let changed = git::uncommitted(repo, None)?;
    if !changed.is_empty() {
        bail!(
            "{clone} has changes that are not committed ({}{}): commit or stash them first; pr \
             never touches the work tree, but prepares nothing from a clone in that state",
            changed[..changed.len().min(5)].join(", "),
            if changed.len() > 5 { ", ..." } else { "" }
        );
    }
    let base = resolve_base(repo, base_name, &clone)?;
    for branch in &series.branches {
        let existing = repo.find_branch(branch, git2::BranchType::Local);
        if existing.as_ref().is_ok_and(|b| b.is_head()) {
            bail!(
                "branch `{branch}` is checked out in {clone}: pr will not move it; check out \
                 another branch there, or choose other names with --prefix"
            );
        }
        if existing.is_ok() && !force_branch {
            bail!(
                "branch `{branch}` already exists in {clone}: choose other names with --prefix, \
                 or replace the branches with --force-branch"
            );
        }
    }
    let base_report = base::relate(repo, base, published, &series.patches)?;
    // Objects go to an in-memory backend first: a patch that fails writes nothing.
    let odb = repo.odb()?;
    let memory = odb.add_new_mempack_backend(1000)?;
    let id = base.to_string();
    let at = format!("on `{base_name}` ({}); {clone} is as it was", short(&id));
    let stack = build(repo, base, series, contributor).context(at)?;
    let call_sites = base::audit(repo, base)?;
    // Not the whole mempack: its dump packs every tree and blob the commits reach.
    let on_disk = Repository::open(repo.path())?;
    let disk = on_disk.odb()?;
    for entry in &stack {
        write_missing(repo, &disk, entry.commit)?;
    }
    for entry in &stack {
        let commit = on_disk.find_commit(entry.commit)?;
        on_disk.branch(&entry.branch, &commit, force_branch)?;
    }
    memory.reset()?;
    Ok(Prepared {
        stack,
        base: base_report,
        call_sites,
    })
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
    if repo.revparse_single(name).is_ok() {
        bail!(
            "`{name}` is not a branch of {clone} (a commit or a tag): name the branch the pull \
             request goes to, or make one there with `git branch <name> {name}`"
        );
    }
    bail!(
        "{clone} has no branch `{name}`: fetch it (`git fetch origin {name}`), or name another with --base"
    )
}
