//! The report as Markdown: the whole series, one table per patch, the decode loop, the profile.

use anyhow::Result;
use shared::bench::{TOP_K, TOP_P};

use super::chart::point;
use super::data::{Decode, PatchStep, Report, Step};
use super::stats::{Paired, Placement, CONFIDENCE, PLACEMENT, UNRESOLVED_WIDTH};
use super::Row;

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

pub fn show_time(ns: f64) -> String {
    match ns {
        ns if ns >= 1e6 => format!("{:.2} ms", ns / 1e6),
        ns if ns >= 1e3 => format!("{:.1} µs", ns / 1e3),
        ns => format!("{ns:.0} ns"),
    }
}

/// How one `sample` call was measured and how to read a ratio, with what runs `temperature_0`.
pub(crate) fn setting(report: &Report, temperature_0: Option<Greedy>) -> String {
    let greedy = temperature_0.map_or(String::new(), |greedy| {
        let top_k = format!("`TopK {{ k: {TOP_K}, temperature: 0.0 }}`");
        let sides = match greedy {
            Greedy::After(after) => format!("`ArgMax` on the published crates, {top_k} on {after}"),
            Greedy::BothSides => format!("{top_k} on both sides"),
        };
        format!("; `temperature_0`: {sides}")
    });
    let (model, vocab, seed) = (&report.model, report.vocab, report.seed);
    let (temperature, rounds, confidence) = (report.temperature, report.rounds, CONFIDENCE * 100.0);
    format!(
        "one `sample` call on {model}'s real logits ({vocab} tokens), seed {seed}, temperature \
         {temperature} (`top_k`: k {TOP_K}; `top_p`: p {TOP_P}; `top_k_then_top_p`: both{greedy}), \
         both sides linking the same candle-core; ratios are after over before, the median of the \
         ratios of {rounds} rounds, each timing every build measured there in turn, rotating which \
         goes first, with its {confidence}% bootstrap interval, rounded outwards; \"no measurable \
         cost\" means that interval contains 1.0 and is at most {UNRESOLVED_WIDTH:.2} wide, \
         \"within ±1%\" that it lies there without containing 1.0, too small a difference to \
         count, \"not resolved\" that it contains 1.0 but is wider"
    )
}

/// Who runs greedy sampling through `TopK` in the `temperature_0` comparison.
pub(crate) enum Greedy {
    /// `ArgMax` on the published crates, `TopK` at temperature 0 on the named side.
    After(&'static str),
    /// Both sides have 0001.
    BothSides,
}

/// What a patch table's time columns are.
pub(crate) const COLUMNS: &str =
    "before, after: each side's median time over the same rounds, so their \
    quotient is not quite the median of the rounds' ratios; each row's rounds ran at another \
    time, and the machine's speed drifts between rows, so compare before with after within a row \
    only";

/// What the instruction column and "same instructions" mean.
pub(crate) const INSTRUCTIONS: &str =
    "instructions: after over before, instructions per call counted \
    by valgrind's callgrind on one thread, which machine noise does not move; \"same \
    instructions\" (within 0.1%): both sides execute the same work, so a time difference there \
    counts only beyond what two builds of identical code, timed in the same rounds, differ by, \
    since that much comes from where the code lands in memory rather than from the change; \
    \"more instructions\" or \"fewer instructions\": the time moves against the work";

/// How the A/A pair's range is drawn, as a sentence that begins "The range runs" goes on.
pub(crate) const PLACEMENT_RULE: &str =
    "from 1/m² to m², m being the bound of the two builds' interval \
    furthest from 1.0, read as a factor above 1: a branch's build can lie as far again from the \
    second build as the second lies from the first";

/// Each step's columns up to its ratio, with instructions where counted.
fn step_columns(step: &PatchStep) -> Vec<Column<Step>> {
    let mut columns: Vec<Column<Step>> = vec![
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
pub(crate) fn patch_table(step: &PatchStep) -> String {
    let mut columns = step_columns(step);
    columns.push(("verdict", "---", |r| r.paired.verdict_text()));
    table(&step.rows, &columns)
}

/// A step as the report's template shows it: its heading's words and `table`.
fn step_context(step: &PatchStep, table: String) -> minijinja::Value {
    minijinja::context! {
        patch => step.patch,
        subject => step.subject,
        patch_point => point(&step.patch),
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
        ("published", "---:", |r| show_time(r.published_ns)),
        ("series", "---:", |r| show_time(r.series_ns)),
        ("floor", "---:", |r| or_blank(r.floor_ns, show_time)),
        ("series / published", "---", |r| {
            or_blank(r.paired.as_ref(), Paired::interval)
        }),
        ("control / published", "---", |r| {
            or_blank(r.control.as_ref(), Paired::interval)
        }),
        ("verdict", "---", |r| {
            or_blank(r.paired.as_ref(), Paired::verdict_text)
        }),
        ("instructions", "---:", |r| {
            or_blank(r.instructions, |r| format!("{r:.4}"))
        }),
        ("series / floor", "---:", |r| {
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
            model => report.model,
            tokens => report.decode_tokens,
            rounds => report.decode_rounds,
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
        crate_label => report.crate_label,
        commit => report.commit,
        date => report.date,
        machine => report.machine,
        measured => rows.iter().map(|row| &row.device).collect::<Vec<_>>(),
        patches => report.patches.len(),
        series_setting => setting(report, Some(Greedy::After("the series"))),
        steps_setting => setting(report, Some(Greedy::After("every branch that has 0001"))),
        instructions => INSTRUCTIONS,
        columns => COLUMNS,
        placement_rule => PLACEMENT_RULE,
        placement => PLACEMENT,
        rows_table => table(rows, columns),
        chart => super::chart::SVG,
        forest => super::forest::SVG,
        strip => super::strip::SVG,
        control,
        steps => steps.map(|s| step_context(s, patch_table(s))).collect::<Vec<_>>(),
        decode,
        profile => (!profile.is_empty()).then(|| table(profile, profile_columns)),
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
