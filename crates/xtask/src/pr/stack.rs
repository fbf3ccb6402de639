//! The stack of branches, one per patch, each on the base or on the branch it builds on.

use anyhow::{ensure, Result};
use git2::{Oid, Repository};

use super::Series;
use crate::branches::branches;
use crate::git::short;
use crate::series::{self, Message, Patch};

#[derive(Debug)]
pub struct Entry {
    pub patch: Patch,
    pub message: Message,
    pub branch: String,
    /// The entry whose branch this one starts from (to merge first); `None` for the base.
    pub parent: Option<usize>,
    pub commit: Oid,
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

/// Commits each patch's branch (`branches::branches`) in `repo`, no reference written.
pub fn build(
    repo: &Repository,
    base: Oid,
    series: &Series,
    contributor: &git2::Signature<'_>,
) -> Result<Vec<Entry>> {
    let (patches, base_name) = (&series.patches, base.to_string());
    let tree = repo.find_commit(base)?.tree_id();
    let proposed = |patch: &Patch| patches.iter().any(|p| p.number() == patch.number());
    let trees = branches(
        repo,
        tree,
        short(&base_name),
        &series.linear,
        &series.builds_on,
        &proposed,
    )?;
    let mut entries: Vec<Entry> = Vec::new();
    for ((patch, branch), branch_tree) in patches.iter().zip(&series.branches).zip(trees) {
        let (message, parent) = (patch.message()?, branch_tree.parent);
        let author = author(contributor, &message)?;
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
    ensure!(!entries.is_empty(), "no patch to make a branch of");
    Ok(entries)
}

/// Commits every patch of the linear series, carried ones too, one on another on `base`: a branch
/// that holds the whole series, which `format-patch` writes back whole. Returns the tip.
pub fn series_commits(
    repo: &Repository,
    base: Oid,
    series: &Series,
    contributor: &git2::Signature<'_>,
) -> Result<Oid> {
    let mut tip = base;
    for patch in &series.linear {
        let message = patch.message()?;
        let parent = repo.find_commit(tip)?;
        let tree = repo.find_tree(series::apply(repo, parent.tree_id(), patch)?)?;
        let author = author(contributor, &message)?;
        tip = repo.commit(
            None,
            &author,
            contributor,
            &message.text(),
            &tree,
            &[&parent],
        )?;
    }
    Ok(tip)
}

/// The contributor's identity, at the time the patch records.
fn author(
    contributor: &git2::Signature<'_>,
    message: &Message,
) -> Result<git2::Signature<'static>> {
    Ok(git2::Signature::new(
        contributor.name().unwrap_or_default(),
        contributor.email().unwrap_or_default(),
        &git2::Time::new(message.time.0, message.time.1),
    )?)
}
