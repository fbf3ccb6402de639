//! `cargo xtask format-patch`: a branch of the clone written back into `patches/`, after review.
//!
//! A branch that `pr` made for one patch writes back that patch alone: its commits above the
//! commit `pr` built it on, squashed into one. Any other branch holds the whole series, one
//! commit per patch, matched to the patches by their change or their subject. Either way the
//! series is rebuilt on the published crates, since that is what the patches describe, and a
//! patch whose change and message stay the same keeps its bytes. A branch that `pr` made from a
//! resolution (`patches/on-<name>/`) writes back into that resolution instead (`resolution`).

mod resolution;
mod series_branch;
mod wrote_back;

pub use wrote_back::{Became, PatchBecame, WroteBack};

use std::path::PathBuf;

use anyhow::{bail, ensure, Context, Result};
use git2::{Oid, Repository};

use crate::apply::{self, Outcome};
use crate::cherry_pick;
use crate::git::{self, short};
use crate::patches_dir;
use crate::project::Layout;
use crate::published::{self, Published};
use crate::record;
use crate::series::stack_file::{Retired, StackFile};
use crate::series::{self, Message, Patch};
use crate::trees;

#[derive(Debug, clap::Args)]
pub struct Options {
    /// The clone of candle that holds the branch.
    #[arg(long, value_name = "CLONE")]
    pub candle: PathBuf,
    /// A branch `pr` made for one patch (writes back that patch), or one that holds the whole
    /// series on --base (writes back every patch).
    #[arg(long, value_name = "NAME")]
    pub branch: String,
    /// Where a branch of the whole series starts.
    #[arg(long, default_value = "main")]
    pub base: String,
    /// Let a branch of the whole series leave out these patches, which retire.
    #[arg(long, value_name = "0004,...", value_delimiter = ',')]
    pub drop: Vec<String>,
}

/// Where one patch's new text comes from: commits of the clone, as the change from `onto`'s
/// tree to `tip`'s, with the first commit's message and author.
struct Source {
    commits: Vec<Oid>,
    onto: Oid,
    tip: Oid,
}

impl Source {
    /// The trees the change goes from and to, and the message and author of its first commit,
    /// which the patch that squashes the commits takes.
    fn change(&self, clone: &Repository) -> Result<(Oid, Oid, Message)> {
        let message = Message::of(&clone.find_commit(self.commits[0])?)?;
        let tree = |id| clone.find_commit(id).map(|commit| commit.tree_id());
        Ok((tree(self.onto)?, tree(self.tip)?, message))
    }

    /// The commits, each as its short id and subject, as the summary names them.
    fn shown(&self, clone: &Repository) -> Result<String> {
        let shown = self.commits.iter().map(|id| {
            let subject = git::subject(&clone.find_commit(*id)?)?;
            Ok(format!("{} {subject}", short(&id.to_string())))
        });
        Ok(shown.collect::<Result<Vec<_>>>()?.join(", "))
    }
}

/// One patch of the new series, or of the old one that leaves it.
enum Slot {
    /// Not on the branch: the patch moves over as it is.
    Kept(Patch),
    /// `--drop` names it: it leaves the series.
    Dropped(Patch),
    /// From the branch's commits: in place of `old`, or a new patch numbered `number`.
    From {
        number: String,
        old: Option<Patch>,
        source: Source,
    },
}

impl Slot {
    /// The patch of the old series that this slot takes the place of.
    fn old(&self) -> Option<&Patch> {
        match self {
            Slot::Kept(old) | Slot::Dropped(old) => Some(old),
            Slot::From { old, .. } => old.as_ref(),
        }
    }

    fn number(&self) -> &str {
        match self {
            Slot::Kept(old) | Slot::Dropped(old) => old.number(),
            Slot::From { number, .. } => number,
        }
    }
}

pub fn run(layout: &Layout, options: &Options) -> Result<()> {
    let wrote = write_back(layout, options, &published::load_all(layout)?)?;
    eprint!("{wrote}");
    Ok(())
}

/// `run` on the published crates `published`, which the patches apply to. Returns what it wrote.
pub fn write_back(
    layout: &Layout,
    options: &Options,
    published: &[Published],
) -> Result<WroteBack> {
    let (candle, branch) = (&options.candle, &options.branch);
    patches_dir::refuse_uncommitted(layout)?;
    let repo = git::open(candle)?;
    git::require_clean(
        &repo,
        "commit them (or `git commit --amend`) first, since format-patch writes back commits only",
    )?;
    let dir = layout.patches();
    let series::Series {
        patches,
        stack: stack_file,
        resolutions,
        ..
    } = series::Series::load(&dir)?;
    let tip = git::resolve(&repo, branch)?;
    let mut record = record::read(&repo)?;
    let made = record.branches.get(branch.as_str()).cloned();
    let slots = match made.as_ref().and_then(|m| Some((m.patch.as_ref()?, m.tip))) {
        Some((number, made)) => one_patch(&repo, options, &patches, number, made, tip)?,
        None => series_branch::slots(&repo, options, &patches, &stack_file, tip)?,
    };
    // A branch made from a resolution goes back into it, and the series stays as it is.
    let wrote = match made.as_ref().and_then(|m| m.rewrite.as_ref()) {
        Some(name) => resolution::write_back(&dir, &resolutions, &repo, name, &slots)?,
        None => write_series(layout, published, &repo, &patches, &stack_file, &slots)?,
    };
    // The clone's record: `branch`'s commits up to `tip` are in `patches/` now, so that
    // `pr --force-branch` may move it again. Those of a branch `pr` did not make are in
    // patches/ from now on all the same.
    let written = match made {
        Some(made) => record::Made {
            written: Some(tip),
            ..made
        },
        None => record::Made {
            patch: None,
            rewrite: None,
            tip,
            written: None,
        },
    };
    record.branches.insert(branch.to_string(), written);
    record::write(&repo, &record)?;
    Ok(wrote)
}

/// `slots` written back into `patches/` as the series rebuilt on the crates `published`, unless
/// that would stop a branch or point. Returns what became of each patch.
fn write_series(
    layout: &Layout,
    published: &[Published],
    clone: &Repository,
    patches: &[Patch],
    stack_file: &StackFile,
    slots: &[Slot],
) -> Result<WroteBack> {
    // The series again, on the published crates: the old one first, whose blobs the index lines
    // of the patches moved over name, then the new one.
    let repo = &trees::scratch()?;
    let start = crate::expected::published_tree(repo, published)?;
    let known = apply::blobs(repo, start, patches)?;
    let mut tree = start;
    let write = |slot| write_slot(repo, clone, &mut tree, slot, &known);
    let written = slots.iter().map(write).collect::<Result<Vec<_>>>()?;

    // Every branch and point must still merge, as `vendor` and `pr` make them: otherwise the
    // series written back would stop them, so nothing is written. A dropped patch leaves
    // `[builds-on]`: what built on it builds on the base.
    let dropped = slots.iter().filter(|s| matches!(s, Slot::Dropped(_)));
    let dropped = dropped.map(Slot::number);
    let builds_on = stack_file.builds_on_without(&dropped.collect::<Vec<_>>());
    let new = written.iter().filter_map(|(patch, _)| patch.clone());
    let new: Vec<Patch> = new.collect();
    cherry_pick::on_published(repo, start, &new, &builds_on).context(
        "written back, the series would no longer make every branch; patches/ is as it was",
    )?;
    let series = slots.iter().zip(&written);
    let series = series.map(|(slot, (patch, _))| (slot.old(), patch.as_ref()));
    let retired = Retired {
        why: "dropped by format-patch".to_string(),
        ..Retired::default()
    };
    patches_dir::replace(layout, &series.collect::<Vec<_>>(), &retired)?;
    let patches = slots.iter().zip(written).map(|(slot, (patch, became))| {
        let file_name = patch.as_ref().or(slot.old()).map_or("", |p| &p.file_name);
        PatchBecame {
            number: slot.number().to_string(),
            file_name: file_name.to_string(),
            became,
        }
    });
    Ok(WroteBack {
        patches: patches.collect(),
        next: "`cargo xtask vendor`, then `cargo xtask check`",
    })
}

/// The branch `pr` made for patch `number`: its commits above the commit `pr` built it on.
fn one_patch(
    repo: &Repository,
    options: &Options,
    patches: &[Patch],
    number: &str,
    made: Oid,
    tip: Oid,
) -> Result<Vec<Slot>> {
    let branch = &options.branch;
    ensure!(
        options.drop.is_empty(),
        "--drop needs a branch of the whole series; `{branch}` proposes {number} alone"
    );
    ensure!(
        patches.iter().any(|p| p.number() == number),
        "`{branch}` proposes {number}, which is no patch in patches/ now"
    );
    // The commit `pr` built the branch on; after `git rebase` onto a newer base, that base.
    let recorded = repo.find_commit(made).ok().map(|c| c.parent_id(0));
    let base = git::resolve(repo, &options.base).ok();
    let rebased = base.map(|b| repo.merge_base(b, tip));
    let candidates = [recorded.transpose()?, rebased.transpose()?];
    let mut onto = None;
    for candidate in candidates.into_iter().flatten() {
        if candidate == tip || repo.graph_descendant_of(tip, candidate)? {
            onto = Some(candidate);
            break;
        }
    }
    let Some(onto) = onto else {
        bail!(
            "`{branch}` no longer holds the commit pr built it on: rebase it onto `{}` or onto \
             the branch it builds on",
            options.base
        );
    };
    let commits = commits_between(repo, onto, tip)?;
    ensure!(
        !commits.is_empty(),
        "`{branch}` has no commit above the one it was made on"
    );
    // Its patch's slot takes the commits; the others carry their patches over.
    let mut source = Some(Source { commits, onto, tip });
    let slots = patches.iter().map(|patch| {
        let old = patch.clone();
        match source.take_if(|_| patch.number() == number) {
            Some(source) => Slot::From {
                number: number.to_string(),
                old: Some(old),
                source,
            },
            None => Slot::Kept(old),
        }
    });
    Ok(slots.collect())
}

/// The commits reachable from `tip` and not from `onto`, oldest first.
pub(super) fn commits_between(repo: &Repository, onto: Oid, tip: Oid) -> Result<Vec<Oid>> {
    let mut walk = repo.revwalk()?;
    walk.push(tip)?;
    walk.hide(onto)?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
    Ok(walk.collect::<Result<Vec<_>, _>>()?)
}

/// One slot written back onto `tree`, which becomes the tree after it: its new patch (`None`:
/// dropped), and what happened to it.
fn write_slot(
    scratch: &Repository,
    clone: &Repository,
    tree: &mut Oid,
    slot: &Slot,
    known: &[Oid],
) -> Result<(Option<Patch>, Became)> {
    let written = |bytes: Vec<u8>, outcome| -> Result<(Option<Patch>, Became)> {
        let message = series::parse_message(&bytes)?;
        let file_name = series::file_name(slot.number().parse()?, &message.subject);
        let patch = Patch {
            file_name,
            bytes,
            message,
        };
        Ok((Some(patch), outcome))
    };
    let (old, source) = match slot {
        Slot::Dropped(_) => return Ok((None, Became::Dropped)),
        Slot::From { old, source, .. } => (old.as_ref(), source),
        Slot::Kept(old) => {
            let Some((after, patch)) = apply::move_onto(scratch, *tree, old, known)? else {
                bail!(
                    "{}: the patches before it already make its change, which is then empty",
                    old.file_name
                );
            };
            *tree = after;
            let outcome = if patch.bytes == old.bytes {
                Became::Unchanged
            } else {
                Became::Followed
            };
            return written(patch.bytes, outcome);
        }
    };
    let (onto, tip, message) = source.change(clone)?;
    let changes = apply::changes(clone, onto, tip)?;
    apply::copy_blobs(clone, scratch, &changes)?;
    let after = match apply::change(scratch, *tree, &changes)? {
        Outcome::Applied { tree, .. } => tree,
        Outcome::AlreadyThere => bail!(
            "{} changes nothing that the patches before it do not already change",
            short(&source.tip.to_string())
        ),
        Outcome::Conflict(conflicts) => bail!(
            "the change of {} does not merge into the series before patch {}, {conflicts}",
            short(&source.tip.to_string()),
            slot.number(),
        ),
    };
    let bytes = series::email_of(scratch, *tree, after, &message)?;
    *tree = after;
    if old.is_some_and(|old| old.bytes == bytes) {
        return written(bytes, Became::Unchanged);
    }
    let outcome = Became::Written {
        from: source.shown(clone)?,
        commits: source.commits.len(),
        new: old.is_none(),
    };
    written(bytes, outcome)
}
