//! A branch of the whole series written back: its commits matched to the patches.
//!
//! Each commit is matched to a patch that no earlier commit took, by the first of `MATCHES`
//! that finds one; a commit that none matches is a new patch. Then each of three rules may refuse
//! the branch, saying how to fix it, since writing it back would lose or renumber a patch: every
//! patch is on the branch or dropped, in order, and the new patches come last.

use anyhow::{bail, ensure, Result};
use git2::{Oid, Repository};

use super::{commits_between, Options, Slot, Source};
use crate::branches::StackFile;
use crate::git;
use crate::pr::record;
use crate::series::Patch;

/// What a commit and a patch are compared by: their change (`git patch-id`), then their subject.
type Key = (Oid, String);

/// How a commit finds its patch, in order: by its change, so that a reworded commit keeps its
/// patch, then by its subject, so that an amended one does.
const MATCHES: [fn(&Key, &Key) -> bool; 2] = [|a, b| a.0 == b.0, |a, b| a.1 == b.1];

/// The slots of the branch of the whole series at `tip`, which starts at `--base`: its commits
/// matched to `patches`, once the rules hold.
pub(super) fn whole_series(
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
        .map(|p| Ok((p.diff()?.patchid(None)?, p.message()?.subject)))
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
        let free = |i: &usize| !matched.iter().any(|(_, m)| *m == Some(*i));
        let found = MATCHES.iter().find_map(|same| {
            (0..patches.len())
                .filter(free)
                .find(|&i| same(&keys[i], &key))
        });
        matched.push((id, found));
    }
    // Every patch has its commit, or `--drop` names it: otherwise writing back would drop it.
    let kept = |i| matched.iter().any(|(_, found)| *found == Some(i));
    let dropped = |p: &&Patch| options.drop.iter().any(|n| n == p.number());
    let lost = patches.iter().enumerate().filter(|&(i, _)| !kept(i));
    let lost: Vec<&Patch> = lost.map(|(_, p)| p).filter(|p| !dropped(p)).collect();
    if !lost.is_empty() {
        let names = lost.iter().map(|p| format!("\n    {}", p.file_name));
        let names = names.collect::<String>();
        let (these, them) = match lost.len() {
            1 => ("this patch", "it"),
            _ => ("these patches", "them"),
        };
        let numbers: Vec<&str> = lost.iter().map(|p| p.number()).collect();
        bail!(
            "`{branch}` holds {} on `{base}` and none of them is {these}:{names}\nwriting it \
             back would drop {them}; if `{branch}` is a branch pr made for one patch, its record \
             in {} is missing (run `cargo xtask pr --force-branch` again); to drop them, pass \
             --drop {}",
            matched.len(),
            record::path(repo).display(),
            numbers.join(",")
        );
    }
    // The patches' commits come in the patches' order, since the numbers are the order the
    // series applies in.
    let found: Vec<usize> = matched.iter().filter_map(|(_, found)| *found).collect();
    if let Some(pair) = found.windows(2).find(|pair| pair[1] < pair[0]) {
        let (before, after) = (&patches[pair[0]].file_name, &patches[pair[1]].file_name);
        bail!(
            "`{branch}` puts {before} after {after}: the numbers are the order the series applies \
             in; put the commits back in that order"
        );
    }
    // A new commit comes after every patch's commit, since a new patch takes the next free
    // number.
    if let Some(new) = matched.iter().position(|(_, found)| found.is_none()) {
        if let Some(index) = matched[new..].iter().find_map(|(_, found)| *found) {
            let subject = git::subject(&repo.find_commit(matched[new].0)?)?;
            bail!(
                "`{branch}` has a new commit ({subject}) before {}: a new patch takes the next \
                 free number, so its commit goes last on the branch",
                patches[index].file_name
            );
        }
    }
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
        let commit = matched.iter().find(|(_, m)| *m == Some(index));
        let source = commit.map(|(id, _)| source(*id)).transpose()?;
        slots.push(Slot {
            number: patch.number().to_string(),
            old: Some(patch.clone()),
            drop: source.is_none(),
            source,
        });
    }
    let next: u32 = stack_file.next_number(patches).parse()?;
    let new = matched.iter().filter(|(_, m)| m.is_none());
    for (number, (id, _)) in (next..).zip(new) {
        slots.push(Slot {
            number: format!("{number:04}"),
            old: None,
            drop: false,
            source: Some(source(*id)?),
        });
    }
    Ok(slots)
}
