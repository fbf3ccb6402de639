//! What `pr` tells the contributor on the console and in `target/pr/stack.txt`: the order to open
//! the pull requests in, what landed, what is carried, and what conflicts.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;

use super::base::{BaseRelation, BaseReport, FileState};
use super::notes::Facts;
use super::stack::{Entry, Landed};
use crate::branches::{Carried, Stop, Stopped};
use crate::git::short;
use crate::pin::{self, Pin};
use crate::resolutions::{self, Resolutions};
use crate::series::Patch;

/// The patches left out of the stack because they are carried here, each with why and the
/// upstream pull request that does its job; nothing when there are none.
pub fn carried(patches: &[Patch], carried: &BTreeMap<String, Carried>) -> Result<String> {
    let mut out = String::new();
    for patch in patches {
        let number = patch.number();
        let Some(Carried { why, upstream }) = carried.get(number) else {
            continue;
        };
        if out.is_empty() {
            out += "Carried in this workspace's crates, not proposed (patches/stack.toml):\n";
        }
        let subject = patch.message()?.subject;
        let upstream = upstream.as_ref().map(|pull| format!(" ({pull})"));
        let upstream = upstream.unwrap_or_default();
        out += &format!("  {number}: \"{subject}\": {why}{upstream}\n");
    }
    Ok(out)
}

/// The console report: the order to open the pull requests in, and how the base relates to the
/// pin. With no branch to make, why: every patch landed, or those left conflict (`stopped`).
pub fn console(
    stack: &[Entry],
    stopped: &[Stopped],
    base: Option<&BaseReport>,
    pins: &[Pin],
) -> String {
    let mut out = match (stack.is_empty(), stopped.is_empty()) {
        (true, true) => String::from(
            "Every proposed patch has landed in the base: nothing is left to propose.\n",
        ),
        (true, false) => String::from(
            "No pull request can be opened: every patch left to propose conflicts with the base, \
             or builds on one that does.\n",
        ),
        (false, _) => String::from("Open the pull requests in this order:\n"),
    };
    for (index, entry) in (1..).zip(stack) {
        let depends = match entry.parent {
            None => "on the base alone".to_string(),
            Some(parent) => format!("after {}", stack[parent].branch),
        };
        let (branch, number, subject) =
            (&entry.branch, entry.patch.number(), &entry.message.subject);
        let from = match &entry.resolution {
            Some(name) => format!(", from patches/on-{name}/"),
            None => String::new(),
        };
        out += &format!("  {index}. {branch} ({number}): \"{subject}\", {depends}{from}\n");
    }
    let Some(base) = base else { return out };
    let (commit, label) = (short(&pins[0].commit), pins[0].label());
    let relation = match base.relation {
        BaseRelation::Pinned => format!("The base is the commit {label} was published from."),
        BaseRelation::After { commits } => {
            format!("The base is {commits} commits after {commit} ({label}).")
        }
        BaseRelation::Diverged => format!("The base does not descend from {commit} ({label})."),
        BaseRelation::PinNotInClone => format!(
            "Commit {commit} ({label}) is not in the clone; the base's files are compared with \
             the published crate's:"
        ),
    };
    out += &(relation + "\n");
    for (path, state) in &base.files {
        let holds = |pin: &&Pin| path.starts_with(&format!("{}/", pin.path_in_vcs));
        let holder = pins.iter().find(holds);
        let holder = holder.map_or_else(|| pin::label(pins), Pin::label);
        let state = match state {
            FileState::AsPublished => format!("as published in {holder}"),
            FileState::Changed { added, removed } => {
                format!("changed since {holder} (+{added} -{removed} lines)")
            }
            FileState::NotInBase => "not in the base".to_string(),
            FileState::NotPublished => "not in the published crate".to_string(),
        };
        out += &format!("  {path}: {state}\n");
    }
    out
}

/// The patches the base already holds, each with the commit that brought it.
pub fn landed(landed: &[Landed]) -> String {
    if landed.is_empty() {
        return String::new();
    }
    let mut text = String::from("Already in the base, so no branch is made for them:\n");
    for patch in landed {
        let number = patch.patch.number();
        let line = match &patch.commit {
            Some((id, subject)) => {
                let pull = super::stack::pull_request(subject);
                let pull = pull.map_or(String::new(), |pull| format!(", pull request {pull}"));
                format!(
                    "landed as {} \"{subject}\"{pull}",
                    crate::git::short(&id.to_string())
                )
            }
            None => "landed (the commit that brought it is not among the base's last 1000)".into(),
        };
        text += &format!("  {number}: \"{}\": {line}\n", patch.subject);
    }
    text
}

/// What was made and what is left to do, for the contributor.
pub fn next_steps(
    options: &super::Options,
    stack: &[Entry],
    stopped: &[Stopped],
    out: &Path,
    facts: &Facts,
) -> String {
    if stack.is_empty() {
        let list = out.join("stack.txt");
        return format!("no branch to make; wrote {}\n", list.display());
    }
    let mut text = match &options.candle {
        Some(clone) => format!(
            "made {} in {clone}; push each with `git -C {clone} push <your fork> <branch>`\n",
            match stack.len() {
                1 => "1 branch".to_string(),
                n => format!("{n} branches"),
            },
            clone = clone.display()
        ),
        None => "made the stack on the published crate only: with `--candle <clone>`, pr \
                 makes the branches, checks the base and lists the call sites\n"
            .into(),
    };
    if let (Some(series), false) = (&options.series_branch, stopped.is_empty()) {
        text += &format!("did not make `{series}`: a patch of the series conflicts\n");
    } else if let (Some(clone), Some(series)) = (&options.candle, &options.series_branch) {
        text += &format!(
            "made `{series}` too, every patch of the series on the base, carried ones included: \
             `cargo xtask format-patch --candle {} --branch {series}` writes it back whole\n",
            clone.display()
        );
    }
    let wrote = out.display();
    text += &format!("wrote {wrote} (a folder per branch: title.txt, body.md, the patch)\n");
    let png = crate::bench_report::forest::PNG;
    if stack
        .iter()
        .any(|e| out.join(&e.branch).join(png).is_file())
    {
        text += &format!(
            "attach each folder's {png}, its step as a forest plot, to the pull request's \
             description (GitHub takes a PNG there); the body reads complete without it\n"
        );
    }
    if facts.bench.is_none() {
        text += "no benchmark table: run `cargo bench`, then `cargo xtask bench-report \
                 --callgrind`, then pr again\n";
    }
    if !options.verify {
        text += "the bodies have no CI results: run pr again with --verify\n";
    }
    text
}

/// The patches that get no branch, each with its conflict in full or the patch it builds on,
/// after the carried ones that do not go onto this base; nothing when there are none.
pub fn stopped(stopped: &[Stopped]) -> Result<String> {
    let (mut out, mut carried) = (String::new(), String::new());
    for Stopped { patch, why } in stopped {
        let (number, subject) = (patch.number(), patch.message()?.subject);
        let why = match why {
            Stop::Carried => {
                carried += &format!("  {number}: \"{subject}\"\n");
                continue;
            }
            Stop::Conflict(conflict) => {
                let lines = conflict.lines().map(|line| format!("\n    {line}"));
                format!("it conflicts:{}", lines.collect::<String>())
            }
            Stop::BuildsOn(parent) => {
                format!("it builds on {parent} (patches/stack.toml), which gets no branch")
            }
        };
        out += &format!("  {number}: \"{subject}\": {why}\n");
    }
    let section = |heading: &str, rows: String| match rows.is_empty() {
        true => rows,
        false => format!("{heading}\n{rows}"),
    };
    let carried = section(
        "Carried patches that do not go onto this base (they need no branch):",
        carried,
    );
    Ok(carried + &section("No branch is made or moved for these patches:", out))
}

/// The error `pr` ends with when a patch conflicts, naming each one; `None` when none does.
pub fn conflicts(stopped: &[Stopped]) -> Option<String> {
    let conflicting = stopped
        .iter()
        .filter(|s| matches!(s.why, Stop::Conflict(_)));
    let names: Vec<&str> = conflicting.map(|s| s.patch.file_name.as_str()).collect();
    let (names, rest) = match names.as_slice() {
        [] => return None,
        [name] => (
            name.to_string(),
            "conflicts with the base, so neither it nor a patch that builds on it got a branch \
             (above): redo it as said there",
        ),
        names => (
            names.join(", "),
            "conflict with the base, so none of them, nor a patch that builds on one, got a \
             branch (above): redo each as said there",
        ),
    };
    Some(format!("{names} {rest}, then run pr again"))
}

/// The other bases' pull requests that the base has, each with the patches taken from its
/// resolutions; nothing when the base has none.
pub fn rewrites(rewrites: &[Resolutions]) -> String {
    let mut out = String::new();
    for Resolutions {
        name,
        rewrite,
        patches,
    } in rewrites
    {
        let (pull, why) = (resolutions::shown(name), &rewrite.why);
        let numbers: Vec<&str> = patches.iter().map(|p| p.number()).collect();
        let taken = match numbers.as_slice() {
            [] => format!("no patch taken from patches/on-{name}/"),
            numbers => format!(
                "{} taken from patches/on-{name}/ in place of the patch{}",
                numbers.join(", "),
                if numbers.len() == 1 { "" } else { "es" }
            ),
        };
        out += &format!("The base has {pull} ({why}): {taken}\n");
    }
    out
}
