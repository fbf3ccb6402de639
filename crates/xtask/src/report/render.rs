//! The report as Markdown: the whole series, one table per patch, the decode loop, the profile.

use anyhow::Result;
use minijinja::Value;
use shared::bench::{TOP_K, TOP_P};

use super::data::{Decode, Report, Row, Step, StepRow};
use super::stats::{Paired, Placement, Work, CONFIDENCE, PLACEMENT, UNRESOLVED_WIDTH};

/// A table's column: its header, its alignment and its cell for each row.
type Column<T> = (&'static str, &'static str, fn(&T) -> String);

fn table<T>(rows: &[T], columns: &[Column<T>]) -> String {
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let mut out = line(columns.iter().map(|c| c.0.to_string()).collect());
    let aligns: Vec<&str> = columns.iter().map(|c| c.1).collect();
    out += &format!("|{}|\n", aligns.join("|"));
    for row in rows {
        out += &line(columns.iter().map(|c| (c.2)(row)).collect());
    }
    out
}

/// `value` shown, or an empty cell.
fn or_blank<T>(value: Option<T>, show: impl Fn(T) -> String) -> String {
    value.map(show).unwrap_or_default()
}

/// What a point is, in words.
pub(crate) fn point(name: &str) -> String {
    match name {
        shared::PUBLISHED_POINT => "the published crates".to_string(),
        shared::SERIES_POINT => "the whole series".to_string(),
        number => format!("the branch of {number}"),
    }
}

pub fn show_time(ns: f64) -> String {
    match ns {
        ns if ns >= 1e6 => format!("{:.2} ms", ns / 1e6),
        ns if ns >= 1e3 => format!("{:.1} µs", ns / 1e3),
        ns => format!("{ns:.0} ns"),
    }
}

/// The context that the macros of `templates/measure.md` read, which say how a `sample` call was
/// measured: the report, and the benches' settings and the verdicts' bounds as Rust writes them.
pub(crate) fn how_measured(report: &Report) -> Value {
    minijinja::context! {
        report,
        temperature => report.temperature.to_string(),
        top_k => TOP_K,
        top_p => TOP_P.to_string(),
        confidence => (CONFIDENCE * 100.0).to_string(),
        unresolved_width => format!("{UNRESOLVED_WIDTH:.2}"),
    }
}

/// Each step's columns up to its ratio, with instructions where counted.
fn step_columns(step: &Step) -> Vec<Column<StepRow>> {
    let mut columns: Vec<Column<StepRow>> = vec![
        ("variant", "---", |r| format!("`{}`", r.comparison)),
        ("before", "---:", |r| show_time(r.before_ns)),
        ("after", "---:", |r| show_time(r.after_ns)),
        ("after / before", "---", |r| r.paired.interval()),
    ];
    if step.rows.iter().any(|r| r.instructions.is_some()) {
        columns.push(("instructions", "---:", |r| {
            r.instructions.map_or("-".into(), |r| format!("{r:.4}"))
        }));
    }
    columns
}

/// One patch's table, as a pull request's body shows it, with instructions where counted.
pub(crate) fn patch_table(step: &Step) -> String {
    let mut columns = step_columns(step);
    columns.push(("verdict", "---", |r| r.paired.verdict_text()));
    table(&step.rows, &columns)
}

/// A step as the report's template shows it: its heading's words and `table`.
fn step_context(step: &Step, table: String) -> Value {
    minijinja::context! {
        patch => step.after,
        subject => step.subject,
        patch_point => point(&step.after),
        before_point => point(&step.before),
        table,
    }
}

/// The whole report as Markdown; its devices line names each device the rows did not measure, so
/// that a table without a device's rows never reads as complete.
pub fn report(rows: &[Row], report: &Report, profile: &[(String, f64)]) -> Result<String> {
    let columns: &[Column<Row>] = &[
        ("comparison", "---", |r| r.comparison.clone()),
        ("vocab", "---:", |r| r.vocab.clone()),
        ("device", "---", |r| r.device.clone()),
        ("published, criterion median", "---:", |r| {
            show_time(r.published_ns)
        }),
        ("series, criterion median", "---:", |r| {
            show_time(r.series_ns)
        }),
        ("floor, criterion median", "---:", |r| {
            or_blank(r.floor_ns, show_time)
        }),
        ("series / published, paired rounds", "---", |r| {
            or_blank(r.paired.as_ref(), Paired::interval)
        }),
        ("control / published, paired rounds", "---", |r| {
            or_blank(r.control.as_ref(), Paired::interval)
        }),
        ("verdict", "---", |r| {
            or_blank(r.paired.as_ref(), Paired::verdict_text)
        }),
        ("instructions", "---:", |r| {
            or_blank(r.instructions, |r| format!("{r:.4}"))
        }),
        ("series / floor, of the medians", "---:", |r| {
            or_blank(r.floor_ns, |f| format!("{:.1}", r.series_ns / f))
        }),
    ];
    // The A/A pair, laid out as a step: in place of a verdict, the range outside which a step's
    // difference at the same instructions counts.
    let mut control_columns = step_columns(&report.control);
    control_columns.push(("same instructions count outside", "---", |r| {
        Placement::of(&r.paired).range()
    }));
    let control = step_context(
        &report.control,
        table(&report.control.rows, &control_columns),
    );
    let steps = report.patches.iter();
    let decode = report.decode.as_ref().map(|whole| {
        let measured = steps.clone().filter(|s| !s.decode.is_empty());
        minijinja::context! {
            table => table(whole, &DECODE_COLUMNS),
            steps => measured
                .map(|s| step_context(s, table(&s.decode, &DECODE_COLUMNS)))
                .collect::<Vec<_>>(),
        }
    });
    let profile_columns: &[Column<(String, f64)>] = &[
        ("step", "---", |(step, _)| step.clone()),
        ("median", "---:", |(_, ns)| show_time(*ns)),
    ];
    let context = minijinja::context! {
        measured => rows.iter().map(|row| &row.device).collect::<Vec<_>>(),
        placement => PLACEMENT,
        rows_table => table(rows, columns),
        forest => super::forest::SVG,
        control,
        steps => steps.map(|s| step_context(s, patch_table(s))).collect::<Vec<_>>(),
        decode,
        profile => (!profile.is_empty()).then(|| table(profile, profile_columns)),
        ..how_measured(report)
    };
    Ok(crate::template::render("report", context)? + "\n")
}

/// A side of the decode loop: ms per token (tokens per second), the sampler's share of a token.
fn side(ms: f64, share: f64) -> String {
    format!("{ms:.2} ({:.1}), {:.1}%", 1e3 / ms, share * 100.0)
}

/// The decode tables' columns: the whole series' table and each step's use the same.
const DECODE_COLUMNS: [Column<Decode>; 6] = [
    ("variant", "---", |d| format!("`{}`", d.comparison)),
    ("before", "---", |d| side(d.before_ms, d.before_share)),
    ("after", "---", |d| side(d.after_ms, d.after_share)),
    ("after / before per token", "---", |d| {
        d.per_token.interval()
    }),
    ("sampler's time only", "---", |d| d.sampler_only.interval()),
    ("verdict", "---", |d| d.sampler_only.verdict_text()),
];

/// The benchmark evidence for patch `number` in its pull request: its step, against the point
/// it builds on (`before`), or a sentence saying why there is none.
pub(crate) fn step_evidence(report: &Report, number: &str, before: &str) -> Result<String> {
    // Where there is no step to show, a sentence of the body's says why.
    let said = |name, args: &[&str]| {
        let args: Vec<minijinja::Value> = args.iter().map(|&a| a.into()).collect();
        Ok(crate::template::sentence("body", name, &args))
    };
    if report.stale.iter().any(|n| n == number) {
        return said("bench_stale", &[number, super::FULL_RUN]);
    }
    let Some(step) = report.patches.iter().find(|s| s.after == number) else {
        return said("bench_no_step", &[number]);
    };
    if step.before != before {
        let (was, now) = (point(&step.before), point(before));
        return said("bench_moved", &[number, &was, &now]);
    }
    let greedy = step.rows.iter().any(|r| r.comparison == "temperature_0");
    // A branch that builds on another has 0001 on both sides: the published crates cannot run
    // `TopK` at temperature 0, so the benches leave that comparison out of any other pair.
    let top_k_on = match before {
        shared::PUBLISHED_POINT => "this branch",
        _ => "both sides",
    };
    let counted = step.rows.iter().any(|r| r.instructions.is_some());
    // A difference at the same instructions was weighed against two builds of identical code:
    // what they showed is given, so that a reviewer can check the verdict.
    let pair = |r: &StepRow| {
        let weighed = matches!(
            r.paired.work,
            Some(Work::SameInstructions | Work::Placement)
        );
        let control = report.control.paired(&r.comparison).filter(|_| weighed)?;
        let range = Placement::of(control).range();
        Some((r.comparison.clone(), control.interval(), range))
    };
    let decode = step.decode.iter().map(|d| {
        minijinja::context! {
            comparison => d.comparison,
            from => format!("{:.1}", d.before_share * 100.0),
            to => format!("{:.1}", d.after_share * 100.0),
            sampler_only => d.sampler_only.interval(),
            verdict => d.sampler_only.verdict_text(),
            before_ms => format!("{:.2}", d.before_ms),
            after_ms => format!("{:.2}", d.after_ms),
            per_token => d.per_token.interval(),
        }
    });
    let context = minijinja::context! {
        before => point(before),
        top_k_on => greedy.then_some(top_k_on),
        counted,
        table => patch_table(step),
        pairs => step.rows.iter().filter_map(pair).collect::<Vec<_>>(),
        decode => decode.collect::<Vec<_>>(),
        ..how_measured(report)
    };
    crate::template::render("bench", context)
}
