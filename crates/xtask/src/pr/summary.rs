//! What `pr` tells the contributor on the console and in `target/pr/stack.txt`: the order to open
//! the pull requests in, what landed, what is carried, and what conflicts. The words are the
//! macros of `templates/summary.txt`; this works out what goes in them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use minijinja::{context, Value};

use super::stack::{pull_request, Built, Entry, Landed};
use super::verify::Check;
use crate::cherry_pick::{Stop, Stopped};
use crate::git::short;
use crate::series::resolutions::{self, Resolutions};
use crate::series::stack_file::Carried;
use crate::series::Patch;
use crate::template::call;

/// What `pr` tells the contributor, as data: `text()` is `target/pr/stack.txt`, and the console
/// shows it with the next steps (`Display`).
#[derive(Debug)]
pub struct Summary {
    /// What could not be read or run, such as the real model or the benchmark report: the
    /// console says it first.
    pub warnings: Vec<String>,
    /// The stack as planned: its branches, what landed, what gets no branch, and the rewrites
    /// the base has.
    pub built: Built,
    /// The selected patches that `[carried]` keeps out of the stack, and why each is carried.
    pub carried: Vec<Patch>,
    pub why_carried: BTreeMap<String, Carried>,
    /// Each branch's results of `--verify`, in the stack's order.
    pub checks: Option<Vec<Vec<Check>>>,
    pub next: Next,
}

/// What the next steps depend on, beside the stack.
#[derive(Debug)]
pub struct Next {
    /// The clone the branches were made in (`--candle`), as the user named it.
    pub clone: Option<String>,
    /// `--series-branch`.
    pub series: Option<String>,
    /// `target/pr/`.
    pub out: PathBuf,
    /// Whether some branch's folder has its picture.
    pub pictures: bool,
    /// Whether the committed benchmark report was read.
    pub bench: bool,
    pub verify: bool,
}

impl Summary {
    /// `target/pr/stack.txt`: what landed, the rewrites the base has, the order to open the pull
    /// requests in, what is carried, and what gets no branch.
    pub fn text(&self) -> String {
        let built = &self.built;
        landed(&built.landed)
            + &rewrites(&built.rewrites)
            + &order(&built.stack, &built.stopped)
            + &carried(&self.carried, &self.why_carried)
            + &stopped(&built.stopped)
    }

    /// The conflicts and failed checks that `pr` ends with, once everything else is written.
    pub fn problems(&self) -> Vec<String> {
        let checks = self.checks.as_ref();
        let failed = checks.and_then(|checks| failed(&self.built.stack, checks));
        conflicts(&self.built.stopped)
            .into_iter()
            .chain(failed)
            .collect()
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for warning in &self.warnings {
            writeln!(f, "{warning}")?;
        }
        let (stack, stopped) = (&self.built.stack, &self.built.stopped);
        write!(
            f,
            "{}{}",
            self.text(),
            next_steps(&self.next, stack, stopped)
        )
    }
}

/// The patches left out of the stack because they are carried here, each with why and the
/// upstream pull request that does its job; nothing when there are none.
pub fn carried(patches: &[Patch], carried: &BTreeMap<String, Carried>) -> String {
    let mut rows = Vec::new();
    for patch in patches {
        if let Some(Carried { why, upstream }) = carried.get(patch.number()) {
            let subject = patch.message.subject.clone();
            rows.push(context! { number => patch.number(), subject, why, upstream });
        }
    }
    call("summary", "carried", &[Value::from(rows)])
}

/// The order to open the pull requests in; with no branch to make, why: every patch landed, or
/// those left conflict (`stopped`).
pub fn order(stack: &[Entry], stopped: &[Stopped]) -> String {
    let rows = stack.iter().map(|entry| {
        context! {
            branch => entry.branch,
            number => entry.patch.number(),
            subject => entry.patch.message.subject,
            after => entry.parent.map(|parent| &stack[parent].branch),
            rewrite => entry.rewrite,
        }
    });
    let stopped = Value::from(!stopped.is_empty());
    call("summary", "order", &[rows.collect(), stopped])
}

/// The patches the base already holds, each with the commit that brought it.
pub fn landed(landed: &[Landed]) -> String {
    let rows = landed.iter().map(|landed| {
        let (id, merged) = match &landed.commit {
            Some((id, subject)) => (Some(id.to_string()), Some(subject.as_str())),
            None => (None, None),
        };
        context! {
            number => landed.patch.number(),
            subject => landed.patch.message.subject,
            commit => id.as_deref().map(short),
            merged,
            pull => merged.and_then(pull_request),
        }
    });
    let searched = Value::from(super::stack::LANDED_SEARCH);
    call("summary", "landed", &[rows.collect(), searched])
}

/// What was made and what is left to do, for the contributor.
pub fn next_steps(next: &Next, stack: &[Entry], stopped: &[Stopped]) -> String {
    let png = crate::report::PNG;
    let context = context! {
        branches => stack.len(),
        clone => next.clone,
        series => next.series,
        stopped => !stopped.is_empty(),
        out => next.out.display().to_string(),
        png => next.pictures.then_some(png),
        bench => next.bench,
        verify => next.verify,
    };
    call("summary", "next_steps", &[context])
}

/// The patches that get no branch, each with its conflict in full or the patch it builds on,
/// after the carried ones that do not go onto this base; nothing when there are none.
pub fn stopped(stopped: &[Stopped]) -> String {
    let mut rows = Vec::new();
    for Stopped {
        patch,
        why,
        carried,
    } in stopped
    {
        let (why, detail) = match why {
            _ if *carried => ("carried", String::new()),
            Stop::PassedOver(_) => ("conflict", why.said().unwrap_or_default()),
            Stop::BuildsOn(parent) => ("builds_on", parent.clone()),
        };
        let subject = patch.message.subject.clone();
        rows.push(context! { number => patch.number(), subject, why, detail });
    }
    call("summary", "stopped", &[Value::from(rows)])
}

/// The error `pr` ends with when a patch conflicts, naming each one; `None` when none does.
pub fn conflicts(stopped: &[Stopped]) -> Option<String> {
    let conflicting = stopped
        .iter()
        .filter(|s| !s.carried && matches!(s.why, Stop::PassedOver(_)));
    let names: Vec<&str> = conflicting.map(|s| s.patch.file_name.as_str()).collect();
    let text = call("summary", "conflicts", &[Value::from_serialize(names)]);
    (!text.is_empty()).then_some(text)
}

/// The error `pr` ends with when a command of `--verify` failed, naming each with its branch;
/// `None` when none did. `checks` holds each branch's, in the stack's order.
pub fn failed(stack: &[Entry], checks: &[Vec<Check>]) -> Option<String> {
    let failed = stack.iter().zip(checks).flat_map(|(entry, checks)| {
        let failed = checks.iter().filter(|c| !c.passed);
        failed.map(|c| format!("{}: {}", entry.branch, c.command.text()))
    });
    let text = call("summary", "failed", &[failed.map(Value::from).collect()]);
    (!text.is_empty()).then_some(text)
}

/// The other bases' pull requests that the base has, each with the patches taken from its
/// resolutions; nothing when the base has none.
pub fn rewrites(rewrites: &[Resolutions]) -> String {
    let rows = rewrites.iter().map(|r| {
        let numbers: Vec<&str> = r.patches.iter().map(|p| p.number()).collect();
        let (pull, why) = (resolutions::shown(&r.name), &r.rewrite.why);
        context! { pull, why, name => r.name, numbers }
    });
    call("summary", "rewrites", &[rows.collect()])
}
