//! A branch of the whole series written back: its commits matched to the patches.

use anyhow::{bail, ensure, Result};
use git2::{Oid, Repository};

use super::{commits_between, Options, Slot, Source};
use crate::branches::StackFile;
use crate::git;
use crate::pr::record;
use crate::series::Patch;

/// A branch of the whole series: each commit is matched to the patch with the same change or,
/// failing that, the same subject; the commits after the last matched one are new patches.
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
    if commits.is_empty() {
        bail!("`{branch}` has no commits that `{base}` does not have");
    }
    for number in &options.drop {
        ensure!(
            patches.iter().any(|p| p.number() == number),
            "--drop {number}: no such patch in patches/"
        );
    }
    let mut ids = Vec::new();
    for patch in patches {
        ids.push((patch.diff()?.patchid(None)?, patch.message()?.subject));
    }
    // Each commit's patch, by position in `patches`.
    let mut matched: Vec<Option<usize>> = Vec::new();
    for id in &commits {
        let commit = repo.find_commit(*id)?;
        ensure!(
            commit.parent_count() == 1,
            "{id} is a merge: rebase `{branch}` onto `{base}` first"
        );
        let diff = repo.diff_tree_to_tree(
            Some(&commit.parent(0)?.tree()?),
            Some(&commit.tree()?),
            None,
        )?;
        let patchid = diff.patchid(None)?;
        let subject = commit.summary()?.unwrap_or_default();
        let free = |index: &usize| !matched.contains(&Some(*index));
        let by_change = (0..patches.len())
            .filter(free)
            .find(|&i| ids[i].0 == patchid);
        let by_subject = (0..patches.len())
            .filter(free)
            .find(|&i| ids[i].1 == subject);
        matched.push(by_change.or(by_subject));
    }
    let lost: Vec<&Patch> = (0..patches.len())
        .filter(|i| !matched.contains(&Some(*i)))
        .map(|i| &patches[i])
        .filter(|p| !options.drop.iter().any(|n| n == p.number()))
        .collect();
    if !lost.is_empty() {
        let names = lost
            .iter()
            .map(|p| format!("\n    {}", p.file_name))
            .collect::<String>();
        bail!(
            "`{branch}` holds {} on `{base}` and none of them is {}:{names}\nwriting it \
             back would drop {}; if `{branch}` is a branch pr made for one patch, its record in \
             {} is missing (run `cargo xtask pr --force-branch` again); to drop them, pass \
             --drop {}",
            commits.len(),
            if lost.len() == 1 {
                "this patch"
            } else {
                "these patches"
            },
            if lost.len() == 1 { "it" } else { "them" },
            record::path(repo).display(),
            lost.iter()
                .map(|p| p.number())
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    // The numbers are the order the series applies in: no commit may move a patch, and a new one
    // takes a number after every other.
    let mut last = None;
    let mut new_from = None;
    for (position, found) in matched.iter().enumerate() {
        match (found, new_from) {
            (Some(index), None) => {
                if last.is_some_and(|last| *index < last) {
                    bail!(
                        "`{branch}` puts {} after {}: the numbers are the order the series \
                         applies in; put the commits back in that order",
                        patches[last.unwrap_or_default()].file_name,
                        patches[*index].file_name
                    );
                }
                last = Some(*index);
            }
            (None, _) => {
                new_from.get_or_insert(position);
            }
            (Some(index), Some(new)) => {
                let subject = repo
                    .find_commit(commits[new])?
                    .summary()?
                    .unwrap_or_default()
                    .to_string();
                bail!(
                    "`{branch}` has a new commit ({subject}) before {}: a new patch takes the \
                     next free number, so its commit goes last on the branch",
                    patches[*index].file_name
                );
            }
        }
    }
    let mut slots = Vec::new();
    for (index, patch) in patches.iter().enumerate() {
        let source = matched
            .iter()
            .position(|m| *m == Some(index))
            .map(|at| Source {
                commits: vec![commits[at]],
                onto: repo
                    .find_commit(commits[at])
                    .and_then(|c| c.parent_id(0))
                    .unwrap_or(onto),
                tip: commits[at],
            });
        slots.push(Slot {
            number: patch.number().to_string(),
            old: Some(patch.clone()),
            drop: source.is_none(),
            source,
        });
    }
    let mut next: u32 = stack_file.next_number(patches).parse()?;
    for (at, found) in matched.iter().enumerate() {
        if found.is_none() {
            let parent = repo.find_commit(commits[at])?.parent_id(0)?;
            slots.push(Slot {
                number: format!("{next:04}"),
                old: None,
                drop: false,
                source: Some(Source {
                    commits: vec![commits[at]],
                    onto: parent,
                    tip: commits[at],
                }),
            });
            next += 1;
        }
    }
    Ok(slots)
}
