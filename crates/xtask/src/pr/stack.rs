//! The stack of branches, one per patch: a patch that applies on the base alone is branched
//! from the base; any other is branched from the previous patch's branch.

use anyhow::{bail, Context, Result};
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
        &self.patch.file_name[..4]
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

/// The branch name made from a patch's subject, its area prefix left out:
/// "generation: Sample greedily at temperature 0" -> "sample-greedily-at-temperature-0".
pub fn branch_name(prefix: &str, message: &Message) -> String {
    let name = series::file_name(0, without_area(&message.subject));
    let name = name.trim_start_matches("0000-").trim_end_matches(".patch");
    format!("{prefix}{}", name.to_ascii_lowercase())
}

/// "generation: Sample greedily" -> "Sample greedily".
pub fn without_area(subject: &str) -> &str {
    match subject.split_once(": ") {
        Some((area, rest)) if !area.contains(' ') => rest,
        _ => subject,
    }
}

/// Commits each patch onto its parent in `repo`'s object database: the base if the patch
/// applies there alone, else the previous entry. Nothing is written to any reference.
pub fn build(
    repo: &Repository,
    base: Oid,
    patches: &[Patch],
    branches: &[String],
) -> Result<Stack> {
    let mut entries: Vec<Entry> = Vec::new();
    for (patch, branch) in patches.iter().zip(branches) {
        let message = patch.message()?;
        let base_tree = repo.find_commit(base)?.tree_id();
        let (parent, onto, tree) = match series::apply(repo, base_tree, patch) {
            Ok(tree) => (Parent::Base, base, tree),
            Err(alone) => {
                let Some(previous) = entries.len().checked_sub(1) else {
                    return Err(alone)
                        .with_context(|| format!("on the base ({})", short(&base.to_string())));
                };
                let onto = entries[previous].commit;
                let tree = series::apply(repo, repo.find_commit(onto)?.tree_id(), patch)
                    .with_context(|| {
                        format!(
                            "{} applies neither on the base nor on {}",
                            patch.file_name, entries[previous].patch.file_name
                        )
                    })?;
                (Parent::Entry(previous), onto, tree)
            }
        };
        let author = message.signature()?;
        let committer = repo.signature().unwrap_or_else(|_| author.clone());
        let parent_commit = repo.find_commit(onto)?;
        let commit = repo.commit(
            None,
            &author,
            &committer,
            &message.text(),
            &repo.find_tree(tree)?,
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
