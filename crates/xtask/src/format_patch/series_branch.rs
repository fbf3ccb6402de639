//! A branch of the whole series written back: its commits matched to the patches.
//!
//! Each commit is matched to a patch that no earlier commit took, by the first of `MATCHES`
//! that finds one; a commit that none matches is a new patch. Then each of `RULES` may refuse the
//! branch, saying how to fix it, since writing it back would lose or renumber a patch.

use anyhow::{bail, ensure, Result};
use git2::{Oid, Repository};

use super::{commits_between, Options, Slot, Source};
use crate::git;
use crate::record;
use crate::series::stack_file::StackFile;
use crate::series::Patch;

/// What a commit and a patch are compared by: their change (`git patch-id`), then their subject.
type Key = (Oid, String);

/// The branch as matched: its commits, oldest first, each with its patch's position in
/// `patches`, if it has one.
struct Matching<'a> {
    options: &'a Options,
    repo: &'a Repository,
    patches: &'a [Patch],
    commits: Vec<(Oid, Option<usize>)>,
}

/// The slots of a branch of the whole series, `tip`: its commits matched to `patches`, once the
/// branch keeps every patch, in order, with the new ones last (each check fails with how to fix
/// the branch).
pub(super) fn slots(
    repo: &Repository,
    options: &Options,
    patches: &[Patch],
    stack_file: &StackFile,
    tip: Oid,
) -> Result<Vec<Slot>> {
    let (branch, base) = (&options.branch, &options.base);
    let onto = git::resolve(repo, base)?;
    let commits = commits_between(repo, onto, tip)?;
    ensure!(
        !commits.is_empty(),
        "`{branch}` has no commits that `{base}` does not have"
    );
    for number in &options.drop {
        ensure!(
            patches.iter().any(|p| p.number() == number),
            "--drop {number}: no such patch in patches/"
        );
    }
    let keys = (patches.iter())
        .map(|p| Ok((p.diff()?.patchid(None)?, p.message.subject.clone())))
        .collect::<Result<Vec<Key>>>()?;
    let mut matched: Vec<(Oid, Option<usize>)> = Vec::new();
    for &id in &commits {
        let commit = repo.find_commit(id)?;
        ensure!(
            commit.parent_count() == 1,
            "{id} is a merge: rebase `{branch}` onto `{base}` first"
        );
        let diff = git::diff_trees(repo, commit.parent(0)?.tree_id(), commit.tree_id())?;
        let key = (diff.patchid(None)?, git::subject(&commit)?);
        // By its change, so that a reworded commit keeps its patch, then by its subject, so
        // that an amended one does.
        let free = |i: &usize| !matched.iter().any(|(_, m)| *m == Some(*i));
        let by =
            |same: &dyn Fn(&Key) -> bool| (0..keys.len()).filter(free).find(|&i| same(&keys[i]));
        let found = by(&|k| k.0 == key.0).or_else(|| by(&|k| k.1 == key.1));
        matched.push((id, found));
    }
    let matching = Matching {
        options,
        repo,
        patches,
        commits: matched,
    };
    every_patch_kept(&matching)?;
    patches_in_order(&matching)?;
    new_patches_last(&matching)?;
    // Each patch from its commit, or dropped; then the new ones, each taking the next number.
    let source = |id: Oid| -> Result<Source> {
        let onto = repo.find_commit(id)?.parent_id(0)?;
        Ok(Source {
            commits: vec![id],
            onto,
            tip: id,
        })
    };
    let mut slots = Vec::new();
    for (index, patch) in patches.iter().enumerate() {
        let old = patch.clone();
        slots.push(
            match matching.commits.iter().find(|(_, m)| *m == Some(index)) {
                Some((id, _)) => Slot::From {
                    number: patch.number().to_string(),
                    old: Some(old),
                    source: source(*id)?,
                },
                None => Slot::Dropped(old),
            },
        );
    }
    let next: u32 = stack_file.next_number(patches).parse()?;
    let new = matching.commits.iter().filter(|(_, m)| m.is_none());
    for (number, (id, _)) in (next..).zip(new) {
        slots.push(Slot::From {
            number: format!("{number:04}"),
            old: None,
            source: source(*id)?,
        });
    }
    Ok(slots)
}

/// Every patch has its commit, or `--drop` names it: otherwise writing back would drop it.
fn every_patch_kept(m: &Matching) -> Result<()> {
    let kept = |i| m.commits.iter().any(|(_, found)| *found == Some(i));
    let dropped = |p: &&Patch| m.options.drop.iter().any(|n| n == p.number());
    let lost = m.patches.iter().enumerate().filter(|&(i, _)| !kept(i));
    let lost: Vec<&Patch> = lost.map(|(_, p)| p).filter(|p| !dropped(p)).collect();
    if lost.is_empty() {
        return Ok(());
    }
    let (branch, base) = (&m.options.branch, &m.options.base);
    let names = lost.iter().map(|p| format!("\n    {}", p.file_name));
    let names = names.collect::<String>();
    let (these, them) = match lost.len() {
        1 => ("this patch", "it"),
        _ => ("these patches", "them"),
    };
    let numbers: Vec<&str> = lost.iter().map(|p| p.number()).collect();
    bail!(
        "`{branch}` holds {} on `{base}` and none of them is {these}:{names}\nwriting it back \
         would drop {them}; if `{branch}` is a branch pr made for one patch, its record in {} is \
         missing (run `cargo xtask pr --force-branch` again); to drop them, pass --drop {}",
        m.commits.len(),
        record::path(m.repo).display(),
        numbers.join(",")
    )
}

/// The patches' commits come in the patches' order, since the numbers are the order the series
/// applies in.
fn patches_in_order(m: &Matching) -> Result<()> {
    let found: Vec<usize> = m.commits.iter().filter_map(|(_, found)| *found).collect();
    let Some(pair) = found.windows(2).find(|pair| pair[1] < pair[0]) else {
        return Ok(());
    };
    let (before, after) = (&m.patches[pair[0]], &m.patches[pair[1]]);
    bail!(
        "`{}` puts {} after {}: the numbers are the order the series applies in; put the \
         commits back in that order",
        m.options.branch,
        before.file_name,
        after.file_name
    )
}

/// A new commit comes after every patch's commit, since a new patch takes the next free number.
fn new_patches_last(m: &Matching) -> Result<()> {
    let new = m.commits.iter().position(|(_, found)| found.is_none());
    let Some(new) = new else { return Ok(()) };
    let Some(index) = m.commits[new..].iter().find_map(|(_, found)| *found) else {
        return Ok(());
    };
    let subject = git::subject(&m.repo.find_commit(m.commits[new].0)?)?;
    bail!(
        "`{}` has a new commit ({subject}) before {}: a new patch takes the next free number, \
         so its commit goes last on the branch",
        m.options.branch,
        m.patches[index].file_name
    )
}
