//! Each pull request's body in candle's style, from `templates/body.md` and the evidence's
//! templates beside it; `summary` writes the console.

use anyhow::Result;
use minijinja::Value;
use shared::repro::Table;

use super::audit::CallSite;
use super::facts::Facts;
use super::stack::Entry;
use super::verify::Check;
use crate::pin::{self, Pin};
use crate::series::notes::{Notes, Part};
use crate::template::{self, render};

/// The body of `stack[index]`'s pull request: its message, its notes with the evidence they ask
/// for, and candle's CI commands' results where `checks` has them.
pub fn body(
    stack: &[Entry],
    index: usize,
    notes: &Notes,
    facts: &Facts,
    pins: &[Pin],
    checks: Option<&[Check]>,
) -> Result<String> {
    let entry = &stack[index];
    let number = entry.patch.number();
    let message = entry.patch.message.body.as_str();
    let (summary, fix) = message.split_once("\n\n").unwrap_or((message, ""));
    // The point that the branch builds on: the published crates, or the branch of a patch.
    let parent = entry.parent.map(|p| stack[p].patch.number());
    let before = parent.unwrap_or(shared::PUBLISHED_POINT);
    // On a base that rewrites the sampler, one sentence, at the first of the two markers, says
    // why the tables measured on the published crates are left out.
    let has = |marker: &Part| Value::from(notes.parts().any(|part| part == marker));
    let tables = [has(&Part::RealModel), has(&Part::Bench)];
    let first_table = notes
        .parts()
        .find(|p| matches!(p, Part::RealModel | Part::Bench));
    let left_out = (!facts.rewrites.is_empty()).then(|| {
        let (label, shown) = (pin::label(pins), facts.rewrites.join(" and "));
        sentence(
            "left_out",
            &[&tables[..], &[label.into(), shown.into()]].concat(),
        )
    });
    // On a base whose pull request only adds code, the tables hold; a sentence says where they
    // were measured.
    let added = (!facts.adds_only.is_empty() && left_out.is_none()).then(|| {
        let shown = facts.adds_only.join(" and ");
        sentence("added", &[&tables[..], &[shown.into()]].concat())
    });
    let part_text = |part: &Part| -> Result<String> {
        Ok(match part {
            Part::RealModel | Part::Bench if left_out.is_some() => {
                match Some(part) == first_table {
                    true => left_out.clone().unwrap_or_default(),
                    false => String::new(),
                }
            }
            Part::Text(text) => text.clone(),
            Part::CallSites => match &facts.call_sites {
                Some(sites) => call_sites(sites),
                None => sentence("missing", &["call_sites".into()]),
            },
            Part::RealModel => match &facts.real_model {
                Some(table) => real_model(table, pins, before, number)?,
                None => sentence("missing", &["real_model".into()]),
            },
            Part::Bench => match &facts.bench {
                Some(report) => crate::report::step_evidence(report, number, before)?,
                None => sentence("missing", &["bench".into()]),
            },
        })
    };
    let text = |parts: &[Part]| -> Result<String> {
        let with_note = |part: &Part| -> Result<String> {
            let text = part_text(part)?;
            Ok(match (&added, Some(part) == first_table) {
                (Some(note), true) => format!("{note}\n\n{text}"),
                _ => text,
            })
        };
        let texts = parts.iter().map(with_note).collect::<Result<Vec<_>>>()?;
        let texts = texts.into_iter().filter(|text| !text.is_empty());
        Ok(texts.map(|text| text + "\n\n").collect())
    };
    let checks = checks.map(|checks| {
        let row = |check: &Check| {
            let seconds = format!("{:.0}", check.seconds);
            let (passed, cross_metal) = (check.passed, check.command.cross_metal);
            minijinja::context! { command => check.command.text(), passed, cross_metal, seconds }
        };
        checks.iter().map(row).collect::<Vec<_>>()
    });
    // The subjects of the branches this one builds on, the first to merge first.
    let ancestors = std::iter::successors(entry.parent, |&i| stack[i].parent);
    let subject = |i: usize| stack[i].patch.message.subject.as_str();
    let mut depends: Vec<&str> = ancestors.map(subject).collect();
    depends.reverse();
    let context = minijinja::context! {
        preamble => text(&notes.preamble)?,
        summary,
        fix,
        sections => text(&notes.sections)?,
        added_tests => added_tests(&entry.patch.bytes),
        checks,
        test_plan => text(&notes.test_plan)?,
        depends,
        subject => entry.patch.message.subject,
    };
    Ok(render("body", context)? + "\n")
}

/// The sentence that the macro `name` of `templates/body.md` writes with `args`.
fn sentence(name: &str, args: &[Value]) -> String {
    template::sentence("body", name, args)
}

/// The calls of `from_sampling` in the base, counted in words and listed by who guards them.
fn call_sites(sites: &[CallSite]) -> String {
    sentence("call_sites", &[Value::from_serialize(sites)])
}

/// The cases whose outcome this branch changes, against the branch it builds on.
fn real_model(table: &Table, pins: &[Pin], before: &str, number: &str) -> Result<String> {
    // An outcome in a table's cell: an error with its context on lines of their own, as candle
    // writes it, keeps them apart with `<br>`.
    let cell = |outcome: &String| outcome.replace('\n', "<br>");
    let mut outcomes = Vec::new();
    for row in &table.rows {
        let (Some(from), Some(to)) = (row.points.get(before), row.points.get(number)) else {
            return Ok(sentence("no_column", &[number.into(), before.into()]));
        };
        outcomes.push((&row.case, cell(from), cell(to)));
    }
    let changed: Vec<_> = outcomes.iter().filter(|(_, a, b)| a != b).collect();
    let context = minijinja::context! {
        table,
        prompt => format!("{:?}", table.prompt),
        before,
        published => (before == shared::PUBLISHED_POINT).then(|| pin::label(pins)),
        cases => outcomes.len(),
        unchanged => outcomes.len() - changed.len(),
        changed,
    };
    render("real_model", context)
}

/// The tests a patch adds, per file: added `fn`s after a `#[test]`, which may be a context line.
fn added_tests(patch: &[u8]) -> Vec<(String, Vec<String>)> {
    let mut files: Vec<(String, Vec<String>)> = Vec::new();
    let mut after_test = false;
    for line in String::from_utf8_lossy(patch).lines() {
        if let Some(path) = line.strip_prefix("+++ b/") {
            files.push((path.to_string(), Vec::new()));
            after_test = false;
            continue;
        }
        let added = line.strip_prefix('+').map(str::trim);
        let name = added.and_then(|a| a.strip_prefix("fn ")?.split('(').next());
        if after_test {
            if let (Some(name), Some((_, tests))) = (name, files.last_mut()) {
                tests.push(name.to_string());
            }
        }
        let code = added.or(line.strip_prefix(' ').map(str::trim));
        after_test = code == Some("#[test]");
    }
    files.retain(|(_, tests)| !tests.is_empty());
    files
}

#[cfg(test)]
#[path = "../../tests/private/pr_render.rs"]
mod tests;
