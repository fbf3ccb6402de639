//! Each patch's tree cherry-picked onto its parent's: `pr` commits these, `vendor` benches them.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};

use crate::apply::{self, Outcome};
use crate::series::Patch;

mod stop;

pub use stop::{Stop, Stopped, Tried, Why};

/// One patch's branch: the candidate that stands for the patch, the rewrite whose resolution
/// that is (`None`: the patch as written), the branch it starts from (`None`: the base), and its
/// tree.
#[derive(Clone, Debug)]
pub(crate) struct Branch {
    pub patch: Patch,
    pub rewrite: Option<String>,
    pub parent: Option<usize>,
    pub tree: Oid,
}

/// One patch of the series as `branches` takes it.
#[derive(Clone, Debug)]
pub(crate) struct Wanted {
    pub patch: Patch,
    /// What may stand for it on this base, in the order to try them: its resolutions for the
    /// rewrites the base has, each with the rewrite's name, then the patch itself (`None`).
    pub candidates: Vec<(Option<String>, Patch)>,
    /// It gets a branch; a carried one stays in the linear series alone.
    pub proposed: bool,
    /// A commit of the base made it as it stands, as a squash merge does.
    pub landed: bool,
}

impl Wanted {
    /// `patch` alone, proposed, on a base that has none of it.
    pub(crate) fn as_written(patch: &Patch) -> Wanted {
        Wanted {
            patch: patch.clone(),
            candidates: vec![(None, patch.clone())],
            proposed: true,
            landed: false,
        }
    }
}

/// Whether a branch's tree builds on the base, asked of a candidate taken after the first for
/// its patch: the candidate, the base's tree, the branch's tree. That a candidate applies does
/// not prove that its code fits the base's, as when another pull request added a variant that a
/// `match` must list.
pub type BuildCheck<'a> = &'a dyn Fn(&Patch, Oid, Oid) -> Result<bool>;

/// The branches of a series on a base, the patches the base already holds, and those that
/// conflict with it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Branches {
    pub branches: Vec<Branch>,
    /// The proposed patches whose change the base already holds, as after a merge upstream:
    /// they get no branch, and the branches that built on them start from the base.
    pub landed: Vec<Patch>,
    /// The patches that conflict, and those that build on them: no branch for them, while the
    /// others still get theirs.
    pub stopped: Vec<Stopped>,
}

/// Every patch's branch on `published`, the tree of the published crates, which the series is
/// written for: the first conflict fails.
pub(crate) fn on_published(
    repo: &Repository,
    published: Oid,
    patches: &[Patch],
    builds_on: &BTreeMap<String, String>,
) -> Result<Vec<Branch>> {
    let base = "the published crates";
    let wanted: Vec<Wanted> = patches.iter().map(Wanted::as_written).collect();
    let made = branches(
        repo,
        published,
        base,
        &wanted,
        builds_on,
        &[],
        &|_, _, _| Ok(true),
    )?;
    let Some(stopped) = made.stopped.first() else {
        return Ok(made.branches);
    };
    let file = &stopped.patch.file_name;
    match stopped.why.said() {
        Some(conflict) => bail!("{conflict}"),
        None => bail!("{file} got no branch"),
    }
}

/// Each patch's change in the linear series, merged onto the branch `builds_on` names or `base`:
/// one branch per proposed patch. The others stay in the linear series, so that the patches
/// after them apply as written, but get no branch. A patch whose context moved on the base is
/// merged three ways from `blobs`, those the series gives on the published crates, as `git am
/// -3` does. A patch the base holds already, or that landed, gets no branch. Each patch's
/// candidates are tried in turn, and one after the first must build on the base (`builds`). A
/// patch that conflicts is left out of the linear series, and it and the patches that build on
/// it are `stopped`.
pub(crate) fn branches(
    repo: &Repository,
    base: Oid,
    base_name: &str,
    wanted: &[Wanted],
    builds_on: &BTreeMap<String, String>,
    blobs: &[Oid],
    builds: BuildCheck<'_>,
) -> Result<Branches> {
    let picker = Picker {
        repo,
        base,
        base_name,
        blobs,
        builds,
    };
    let mut linear = base;
    let mut made = Branches::default();
    for want in wanted {
        let (patch, proposed) = (&want.patch, want.proposed);
        // A patch that gets no branch: a carried one is proposed nowhere, whatever stops it.
        let stop = |why| Stopped {
            patch: patch.clone(),
            why,
            carried: !proposed,
        };
        let parent = builds_on.get(patch.number());
        let stopped = |wanted: &String| made.stopped.iter().any(|s| s.patch.number() == wanted);
        if let Some(parent) = parent.filter(|parent| stopped(parent)) {
            made.stopped.push(stop(Stop::BuildsOn(parent.clone())));
            continue;
        }
        // Merged upstream, as its own commit: the base holds its change, though a later one may
        // have changed its lines again.
        if want.landed {
            if proposed {
                made.landed.push(patch.clone());
            }
            continue;
        }
        let target = Target { parent, proposed };
        let taken = match picker.take(want, &target, linear, &made)? {
            Pick::Taken(taken) => *taken,
            // The patches after it go on without it, as `git am --skip` would.
            Pick::PassedOver(passed_over) => {
                made.stopped.push(stop(Stop::PassedOver(passed_over)));
                continue;
            }
        };
        let Outcome::Applied { tree: after, .. } = taken.outcome else {
            // The linear series holds its change already.
            if proposed {
                made.landed.push(patch.clone());
            }
            continue;
        };
        let before = std::mem::replace(&mut linear, after);
        if !proposed {
            continue;
        }
        let branch = match taken.branch {
            Some(branch) => branch,
            None => picker.branch_on(&target, taken.candidate, before, after, &made)?,
        };
        match branch.tree {
            Ok(tree) => made.branches.push(Branch {
                patch: taken.candidate.clone(),
                rewrite: taken.rewrite.clone(),
                parent: branch.parent,
                tree,
            }),
            // It stays in the linear series, where it applies: only its branch is not made.
            Err(why) => made
                .stopped
                .push(stop(Stop::PassedOver(vec![(taken.what, why)]))),
        }
    }
    Ok(made)
}

/// What stays the same while `branches` goes through the series: where the branches are made,
/// the base, the blobs a three-way merge reads, and the build check of a later candidate.
struct Picker<'a> {
    repo: &'a Repository,
    base: Oid,
    base_name: &'a str,
    blobs: &'a [Oid],
    builds: BuildCheck<'a>,
}

/// What `Picker::take` found among a patch's candidates.
enum Pick<'a> {
    Taken(Box<Taken<'a>>),
    /// None goes on: each candidate with why it was passed over, the first one's conflict first.
    PassedOver(Vec<(Tried, Why)>),
}

/// The candidate that stands for a patch: what it is, in words, the rewrite whose resolution it
/// is, the patch, what it gave on the linear series, and its branch where the build check made
/// it already.
struct Taken<'a> {
    what: Tried,
    rewrite: &'a Option<String>,
    candidate: &'a Patch,
    outcome: Outcome,
    branch: Option<BranchTree>,
}

/// A candidate's branch: the branch it starts from (`None`: the base), and its tree, or why it
/// has none.
struct BranchTree {
    parent: Option<usize>,
    tree: std::result::Result<Oid, Why>,
}

/// Where a patch's branch goes: onto the branch of the patch it builds on (`[builds-on]`) or the
/// base, and whether it gets a branch at all.
struct Target<'a> {
    parent: Option<&'a String>,
    proposed: bool,
}

impl Picker<'_> {
    /// The first of `want`'s candidates that goes onto the linear series at `linear` (and, after
    /// the first, builds on the base), or why none does.
    fn take<'w>(
        &self,
        want: &'w Wanted,
        target: &Target<'_>,
        linear: Oid,
        made: &Branches,
    ) -> Result<Pick<'w>> {
        let mut passed_over = Vec::new();
        for (index, (rewrite, candidate)) in want.candidates.iter().enumerate() {
            let what = match rewrite {
                None => Tried::AsWritten,
                Some(_) => Tried::Resolution,
            };
            let outcome = apply::patch(self.repo, linear, candidate, self.blobs)?;
            if let Outcome::Conflict(conflict) = outcome {
                passed_over.push((what, Why::Conflict(conflict)));
                continue;
            }
            // A later candidate's branch must also build on the base; the branch is kept.
            let mut branch = None;
            if let (Outcome::Applied { tree: after, .. }, true) =
                (&outcome, index > 0 && target.proposed)
            {
                let made = self.branch_on(target, candidate, linear, *after, made)?;
                if let Ok(tree) = made.tree {
                    if !(self.builds)(candidate, self.base, tree)? {
                        passed_over.push((what, Why::DoesNotBuild));
                        continue;
                    }
                }
                branch = Some(made);
            }
            return Ok(Pick::Taken(Box::new(Taken {
                what,
                rewrite,
                candidate,
                outcome,
                branch,
            })));
        }
        Ok(Pick::PassedOver(passed_over))
    }

    /// The branch of a candidate that went onto the linear series, from `linear` to `after`: the
    /// branch it starts from, and its change merged onto that branch's tree (one that holds the
    /// change already keeps its tree), or the conflict.
    fn branch_on(
        &self,
        target: &Target<'_>,
        patch: &Patch,
        linear: Oid,
        after: Oid,
        made: &Branches,
    ) -> Result<BranchTree> {
        let (repo, file) = (self.repo, &patch.file_name);
        let landed = |wanted: &String| made.landed.iter().any(|p| p.number() == wanted);
        let parent = target
            .parent
            .filter(|wanted| !landed(wanted))
            .map(|wanted| {
                let found = made
                    .branches
                    .iter()
                    .position(|b| b.patch.number() == wanted);
                found.with_context(|| {
                    format!(
                    "{file} builds on {wanted} (patches/stack.toml), which is not in the series \
                     before it"
                )
                })
            });
        let parent = parent.transpose()?;
        let onto = parent.map_or(self.base, |index| made.branches[index].tree);
        let tree = match apply::change(repo, onto, &apply::changes(repo, linear, after)?)? {
            Outcome::Applied { tree, .. } => Ok(tree),
            Outcome::AlreadyThere => Ok(onto),
            Outcome::Conflict(conflict) => Err(Why::Onto {
                patch: file.clone(),
                onto: match parent {
                    None => format!("the base ({})", self.base_name),
                    Some(i) => format!("the branch of {}", made.branches[i].patch.file_name),
                },
                conflict,
            }),
        };
        Ok(BranchTree { parent, tree })
    }
}
