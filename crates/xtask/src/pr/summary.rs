//! What `pr` tells the contributor on the console and in `target/pr/stack.txt`: the order to open
//! the pull requests in, what landed, what is carried, and what conflicts. The words are the
//! macros of `templates/summary.txt`; this works out what goes in them.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use minijinja::{context, Value};

use super::facts::Facts;
use super::stack::{pull_request, Entry, Landed};
use super::verify::Check;
use crate::branches::{Stop, Stopped};
use crate::git::short;
use crate::series::resolutions::{self, Resolutions};
use crate::series::stack_file::Carried;
use crate::series::Patch;
use crate::template::call;

/// The patches left out of the stack because they are carried here, each with why and the
/// upstream pull request that does its job; nothing when there are none.
pub fn carried(patches: &[Patch], carried: &BTreeMap<String, Carried>) -> Result<String> {
    let mut rows = Vec::new();
    for patch in patches {
        if let Some(Carried { why, upstream }) = carried.get(patch.number()) {
            let subject = patch.message.subject.clone();
            rows.push(context! { number => patch.number(), subject, why, upstream });
        }
    }
    Ok(call("summary", "carried", &[Value::from(rows)]))
}

/// The order to open the pull requests in; with no branch to make, why: every patch landed, or
/// those left conflict (`stopped`).
pub fn console(stack: &[Entry], stopped: &[Stopped]) -> String {
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
    call("summary", "console", &[rows.collect(), stopped])
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
pub fn next_steps(
    options: &super::Options,
    stack: &[Entry],
    stopped: &[Stopped],
    out: &Path,
    pictures: bool,
    facts: &Facts,
) -> String {
    let png = crate::bench_report::PNG;
    let context = context! {
        branches => stack.len(),
        clone => options.candle.as_ref().map(|clone| clone.display().to_string()),
        series => options.series_branch,
        stopped => !stopped.is_empty(),
        out => out.display().to_string(),
        png => pictures.then_some(png),
        bench => facts.bench.is_some(),
        verify => options.verify,
    };
    call("summary", "next_steps", &[context])
}

/// The patches that get no branch, each with its conflict in full or the patch it builds on,
/// after the carried ones that do not go onto this base; nothing when there are none.
pub fn stopped(stopped: &[Stopped]) -> Result<String> {
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
    Ok(call("summary", "stopped", &[Value::from(rows)]))
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
