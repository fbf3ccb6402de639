//! The stack of branches, one per patch, each on the base or on the branch it builds on.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use git2::{Oid, Repository};

use super::{Proposed, Selection};
use crate::apply::{self, Outcome};
use crate::cherry_pick::{branches, Stopped, Wanted};
use crate::git::short;
use crate::series::resolutions::{self, Resolutions};
use crate::series::{Message, Patch};

#[derive(Clone, Debug)]
pub struct Entry {
    pub patch: Patch,
    pub branch: String,
    /// The entry whose branch this one starts from (to merge first); `None` for the base.
    pub parent: Option<usize>,
    pub commit: Oid,
    /// The rewrite whose resolution stands in for the patch here (`patch` is that resolution).
    pub rewrite: Option<String>,
}

/// The longest branch name: short enough to read in a list of pull requests.
const MAX_BRANCH: usize = 40;

/// "generation: Sample greedily at temperature 0" -> "sample-greedily-at-temperature-0", in as
/// many whole words as fit in `MAX_BRANCH` characters.
pub fn branch_name(prefix: &str, message: &Message) -> String {
    let subject = match message.subject.split_once(": ") {
        Some((area, rest)) if !area.contains(' ') => rest,
        _ => &message.subject,
    };
    let subject = subject.replace('\'', "").to_ascii_lowercase();
    let subject = subject.replace(|c: char| !c.is_ascii_alphanumeric(), " ");
    let mut name = String::new();
    for word in subject.split_whitespace() {
        let longer = format!("{name}{}{word}", if name.is_empty() { "" } else { "-" });
        if longer.len() > MAX_BRANCH {
            break;
        }
        name = longer;
    }
    format!("{prefix}{name}")
}

/// A proposed patch whose change the base holds already: merged upstream.
#[derive(Clone, Debug)]
pub struct Landed {
    pub patch: Patch,
    /// The commit of the base that brought the change, with its subject, when it is among the
    /// base's last `LANDED_SEARCH` first-parent commits.
    pub commit: Option<(Oid, String)>,
}

/// How far back `build` looks for the commit that brought a patch's change.
pub(super) const LANDED_SEARCH: usize = 1000;

/// The stack: the branches to make, the patches the base holds already, and those that get no
/// branch for a conflict.
#[derive(Debug, Default)]
pub struct Built {
    pub stack: Vec<Entry>,
    pub landed: Vec<Landed>,
    pub stopped: Vec<Stopped>,
    /// The other bases' pull requests that the base has, with the resolutions carried for them.
    pub rewrites: Vec<Resolutions>,
}

pub use crate::cherry_pick::BuildCheck;

/// Commits each patch's branch (`cherry_pick::branches`) in `repo`, no reference written. A patch
/// whose context moved on the base merges three ways from the blobs in `known`. On a base with
/// another pull request on the same code, each patch's resolutions for it are tried first, then
/// the patch; one taken after the first must build there (`builds`).
pub fn build(
    repo: &Repository,
    base: Oid,
    selection: &Selection,
    contributor: &git2::Signature<'_>,
    known: &[Oid],
    builds: BuildCheck<'_>,
) -> Result<Built> {
    let (patches, base_name) = (&selection.proposed, base.to_string());
    let tree = repo.find_commit(base)?.tree_id();
    let proposed = |patch: &Patch| patches.iter().any(|p| p.patch.number() == patch.number());
    // On a base that has another pull request on the same code, a patch's resolution for it
    // stands in for the patch.
    let mut rewrites = resolutions::in_tree(repo, tree, &selection.series.resolutions)?;
    for rewrite in &mut rewrites {
        let selected = |r: &Patch| selection.linear.iter().any(|p| p.file_name == r.file_name);
        rewrite.patches.retain(selected);
    }
    let known = [known, &resolutions::blobs_on(repo, tree, &rewrites)?].concat();
    let known = known.as_slice();
    // The resolutions for the pull requests the base has, in `[base]` order, then the patch.
    let of = |patch: &Patch| -> Vec<(Option<String>, Patch)> {
        let resolved = rewrites.iter();
        let resolved = resolved.filter_map(|r| Some((Some(r.name.clone()), r.of(patch)?.clone())));
        resolved.chain([(None, patch.clone())]).collect()
    };
    // Each patch that a commit of the base made as it stands, as a squash merge does: as written,
    // since it may have merged before the other pull request did, or as resolved.
    let mut merged = BTreeMap::new();
    for Proposed { patch, .. } in patches {
        for (_, candidate) in of(patch).iter().rev() {
            if let Some(commit) = merged_as(repo, base, candidate)? {
                merged.insert(patch.number().to_string(), commit);
                break;
            }
        }
    }
    let wanted = selection.linear.iter().map(|patch| Wanted {
        patch: patch.clone(),
        candidates: of(patch),
        proposed: proposed(patch),
        landed: merged.contains_key(patch.number()),
    });
    let trees = branches(
        repo,
        tree,
        short(&base_name),
        &wanted.collect::<Vec<_>>(),
        &selection.series.stack.builds_on,
        known,
        builds,
    )?;
    let mut entries: Vec<Entry> = Vec::new();
    for branch_tree in trees.branches {
        let patch = branch_tree.patch;
        let found = patches.iter().find(|p| p.patch.number() == patch.number());
        let branch = &found.context("a branch for a patch not proposed")?.branch;
        let parent = branch_tree.parent;
        let onto = parent.map_or(base, |index| entries[index].commit);
        let commit = commit(repo, contributor, &patch.message, branch_tree.tree, onto)?;
        entries.push(Entry {
            rewrite: branch_tree.rewrite,
            patch,
            branch: branch.clone(),
            parent,
            commit,
        });
    }
    // Only the resolutions that stood for a patch: not one that landed, or that a patch as
    // written was taken in place of.
    for rewrite in &mut rewrites {
        let name = Some(rewrite.name.clone());
        let taken = |r: &Patch| {
            let entry = entries.iter().find(|e| e.patch.file_name == r.file_name);
            entry.map_or(!proposed(r), |e| e.rewrite == name)
        };
        let landed = |r: &Patch| trees.landed.iter().any(|p| p.file_name == r.file_name);
        rewrite.patches.retain(|r| taken(r) && !landed(r));
    }
    let mut landed = Vec::new();
    for patch in trees.landed {
        // Else the first-parent commit of the base whose tree holds the change and whose
        // parent's tree does not.
        let commit = match merged.remove(patch.number()) {
            Some(commit) => Some(commit),
            None => first_parent_where(repo, base, |parent, _| {
                let outcome = apply::patch(repo, parent.tree_id(), &patch, known)?;
                Ok(outcome != Outcome::AlreadyThere)
            })?,
        };
        landed.push(Landed { patch, commit });
    }
    Ok(Built {
        stack: entries,
        landed,
        stopped: trees.stopped,
        rewrites,
    })
}

/// The first-parent commit of `base`, among its last `LANDED_SEARCH`, that makes `patch`'s
/// change to the patch's files, as `git cherry` tells them: by patch id, which leaves out line
/// numbers and whitespace.
fn merged_as(repo: &Repository, base: Oid, patch: &Patch) -> Result<Option<(Oid, String)>> {
    let diff = patch.diff()?;
    let wanted = diff.patchid(None)?;
    let paths: Vec<String> = crate::git::paths(&diff)
        .map(|p| p.display().to_string())
        .collect();
    first_parent_where(repo, base, |parent, commit| {
        let mut options = git2::DiffOptions::new();
        for path in &paths {
            options.pathspec(path);
        }
        let [old, new] = [parent, commit].map(|c| c.tree());
        let diff = repo.diff_tree_to_tree(Some(&old?), Some(&new?), Some(&mut options))?;
        Ok(diff.deltas().len() > 0 && diff.patchid(None)? == wanted)
    })
}

/// The newest of `base`'s last `LANDED_SEARCH` first-parent commits for which `found(parent,
/// commit)` holds, with its subject.
fn first_parent_where(
    repo: &Repository,
    base: Oid,
    mut found: impl FnMut(&git2::Commit<'_>, &git2::Commit<'_>) -> Result<bool>,
) -> Result<Option<(Oid, String)>> {
    let mut commit = repo.find_commit(base)?;
    for _ in 0..LANDED_SEARCH {
        let Ok(parent) = commit.parent(0) else {
            break;
        };
        if found(&parent, &commit)? {
            return Ok(Some((commit.id(), crate::git::subject(&commit)?)));
        }
        commit = parent;
    }
    Ok(None)
}

/// The pull request a squash-merged subject names, as in `Title (#3900)`.
pub fn pull_request(subject: &str) -> Option<&str> {
    let inner = subject.trim_end().strip_suffix(')')?;
    let at = inner.rfind("(#")?;
    let number = &inner[at + 1..];
    number[1..]
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then_some(number)
}

/// Commits every patch of the linear series, carried ones too, one on another on `base`: a branch
/// that holds the whole series, which `format-patch` writes back whole, less the patches the base
/// holds already. Returns the tip.
pub fn series_commits(
    repo: &Repository,
    base: Oid,
    selection: &Selection,
    contributor: &git2::Signature<'_>,
    known: &[Oid],
) -> Result<Oid> {
    let mut tip = base;
    for patch in &selection.linear {
        let parent = repo.find_commit(tip)?;
        let tree = match apply::patch(repo, parent.tree_id(), patch, known)? {
            Outcome::AlreadyThere => continue,
            outcome => outcome.or_conflict(parent.tree_id())?,
        };
        tip = commit(repo, contributor, &patch.message, tree, tip)?;
    }
    Ok(tip)
}

/// Commits `tree` on `parent` with `message`, by the contributor at the time the patch records.
fn commit(
    repo: &Repository,
    contributor: &git2::Signature<'_>,
    message: &Message,
    tree: Oid,
    parent: Oid,
) -> Result<Oid> {
    let (name, email) = (contributor.name(), contributor.email());
    let author = message.signature(name.unwrap_or_default(), email.unwrap_or_default())?;
    let (tree, parent) = (repo.find_tree(tree)?, repo.find_commit(parent)?);
    let text = message.text();
    Ok(repo.commit(None, &author, contributor, &text, &tree, &[&parent])?)
}
