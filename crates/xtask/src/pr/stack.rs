//! The stack of branches, one per patch: each on the base, or on the branch of the patch that
//! `patches/stack.toml` says it builds on.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use git2::{Oid, Repository};

use crate::git::short;
use crate::series::{self, Message, Patch};

/// Where a patch's branch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parent {
    /// The base: the patch stands alone.
    Base,
    /// The branch of the entry at this index, which must be merged first.
    Entry(usize),
}

/// One patch of the stack, its branch and its commit.
#[derive(Debug)]
pub struct Entry {
    pub patch: Patch,
    pub message: Message,
    pub branch: String,
    pub parent: Parent,
    pub commit: Oid,
}

impl Entry {
    /// The patch's number, as in `0001`.
    pub fn number(&self) -> &str {
        self.patch.number()
    }
}

#[derive(Debug)]
pub struct Stack {
    pub base: Oid,
    pub entries: Vec<Entry>,
}

impl Stack {
    /// The entries that `index` needs merged first, nearest first.
    pub fn ancestors(&self, index: usize) -> Vec<usize> {
        let mut found = Vec::new();
        let mut at = self.entries[index].parent;
        while let Parent::Entry(parent) = at {
            found.push(parent);
            at = self.entries[parent].parent;
        }
        found
    }

    /// The entries branched directly from `index`.
    pub fn children(&self, index: usize) -> Vec<usize> {
        (0..self.entries.len())
            .filter(|&i| self.entries[i].parent == Parent::Entry(index))
            .collect()
    }
}

/// The longest branch name: short enough to read in a list of pull requests.
pub const MAX_BRANCH: usize = 40;

/// The branch name made from a patch's subject, its area prefix left out, in lowercase words
/// joined by `-`, as many whole words as fit in `MAX_BRANCH` characters:
/// "generation: Sample greedily at temperature 0" -> "sample-greedily-at-temperature-0".
pub fn branch_name(prefix: &str, message: &Message) -> String {
    let subject = without_area(&message.subject).replace('\'', "");
    let mut name = String::new();
    for word in subject.split(|c: char| !c.is_ascii_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let joined = match name.is_empty() {
            true => word.to_ascii_lowercase(),
            false => format!("{name}-{}", word.to_ascii_lowercase()),
        };
        if joined.len() > MAX_BRANCH {
            break;
        }
        name = joined;
    }
    format!("{prefix}{name}")
}

/// "generation: Sample greedily" -> "Sample greedily".
pub fn without_area(subject: &str) -> &str {
    match subject.split_once(": ") {
        Some((area, rest)) if !area.contains(' ') => rest,
        _ => subject,
    }
}

/// Commits each patch onto its parent in `repo`'s object database, nothing written to any
/// reference. The patch files form one linear series; each patch's change, from the tree before
/// it in the series to the tree after, is merged onto its parent as `git cherry-pick` would:
/// onto the branch of the patch that `builds_on` names, else onto the base.
pub fn build(
    repo: &Repository,
    base: Oid,
    patches: &[Patch],
    branches: &[String],
    builds_on: &BTreeMap<String, String>,
    contributor: &git2::Signature<'_>,
) -> Result<Stack> {
    let base_tree = repo.find_commit(base)?.tree_id();
    let trees = crate::branches::branches(
        repo,
        base_tree,
        short(&base.to_string()),
        patches,
        builds_on,
    )?;
    let mut entries: Vec<Entry> = Vec::new();
    for ((patch, branch), tree) in patches.iter().zip(branches).zip(trees) {
        let message = patch.message()?;
        let (parent, onto) = match tree.parent {
            None => (Parent::Base, base),
            Some(index) => (Parent::Entry(index), entries[index].commit),
        };
        let parent_commit = repo.find_commit(onto)?;
        // The contributor's identity, at the time the patch records.
        let written = message.signature()?.when();
        let author = git2::Signature::new(
            contributor.name().unwrap_or_default(),
            contributor.email().unwrap_or_default(),
            &written,
        )?;
        let commit = repo.commit(
            None,
            &author,
            contributor,
            &message.text(),
            &repo.find_tree(tree.tree)?,
            &[&parent_commit],
        )?;
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
    Ok(Stack { base, entries })
}

/// Applies `patches` one after another onto `base`, one commit each, as `git am` would: for
/// trying the series on other commits (open pull requests).
pub fn apply_linear(repo: &Repository, base: Oid, patches: &[Patch]) -> Result<Oid> {
    let mut tree = repo.find_commit(base)?.tree_id();
    for patch in patches {
        tree = series::apply(repo, tree, patch)?;
    }
    Ok(tree)
}
