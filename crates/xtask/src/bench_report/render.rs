//! The report as Markdown: the whole series, one table per patch, the decode loop, the profile.

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

/// A patch's heading and what its table sets against what, `what` added to that sentence.
fn step_heading(step: &PatchStep, what: &str) -> String {
    let heading = format!("\n#### {} {}\n\n", step.patch, step.subject);
    let (patch, before) = (point(&step.patch), point(&step.before));
    format!("{heading}This is {patch} against {before}{what}.\n\n")
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

/// The A/A pair, the control against the published crates, laid out as a step: in place of a
/// verdict, the range outside which a step's difference at the same instructions counts.
fn control_section(control: &PatchStep) -> String {
    let mut columns = step_columns(control);
    columns.push(("same instructions count outside", "---", |r| {
        Placement::of(&r.paired).range()
    }));
    format!(
        "\n#### {}: {} (the A/A pair)\n\nThis is the published \
         crates compiled a second time, as a module of their own, against the published crates, \
         timed in the same rounds as every step: the code is identical, so whatever differs here \
         is where the code lands in memory. The last column's range runs {PLACEMENT_RULE}. A step \
         that leaves a variant's instructions as they were counts a time difference only where \
         its interval lies wholly outside that range; inside it, the verdict says the difference \
         is {PLACEMENT} and names no cost or gain.\n\n{}",
        control.patch,
        control.subject,
        table(&control.rows, &columns)
    )
}

/// candle's devices, as the benches prefix their groups, and what measures one.
const DEVICES: [(&str, &str); 3] = [
    ("cpu", "`cargo bench`"),
    (
        "cuda",
        "`cargo bench --features cuda` on a machine with an NVIDIA GPU",
    ),
    ("metal", "`cargo bench --features metal` on a Mac"),
];

/// The whole report as Markdown; its devices line names each device the rows did not measure, so
/// that a table without a device's rows never reads as complete.
pub fn report(rows: &[Row], report: &Report, profile: &[(String, f64)]) -> String {
    let measured = |device| rows.iter().any(|row| row.device == device);
    let devices = DEVICES.map(|(device, how)| match measured(device) {
        true => format!("{device} measured"),
        false => format!("**{device} not run** ({how})"),
    });
    let (crate_label, commit, date) = (&report.crate_label, &report.commit, &report.date);
    let (machine, devices) = (&report.machine, devices.join("; "));
    let mut out = format!(
        "## Sampling cost\n\n{crate_label}; workspace commit {commit}; {date}. Machine: \
         {machine}.\n\n### The whole series\n\nDevices: {devices}.\n\nThe published crates against \
         all {patches} patches: {measured_as}, and on vocabularies drawn from those logits. \
         published, series, floor: criterion's medians of one call; floor: what any implementation \
         that returns the same tokens must compute, written plainly on logits already on the host \
         (for `gumbel_softmax`, whose stream is new, one generator draw per logit and one pass). \
         control / published: the A/A pair, the published crates compiled a second time, as a \
         module of their own, against the published crates in the same rounds, two builds of \
         identical code; a verdict at the same instructions weighs the row against it, as under \
         Patch by patch. {INSTRUCTIONS}.\n\n",
        patches = report.patches.len(),
        measured_as = setting(report, Some(Greedy::After("the series"))),
    );
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
    out += &table(rows, columns);
    out += &format!(
        "\n![Time per call against vocabulary on a log axis, a panel per comparison]({})\n",
        super::chart::SVG
    );
    out += &format!(
        "\n### Patch by patch\n\nEach patch's branch against the branch it builds on, or against \
         the published crates: {}. {COLUMNS}. {INSTRUCTIONS}.\n",
        setting(report, Some(Greedy::After("every branch that has 0001")))
    );
    out += &format!(
        "\n![Each step's time ratio per variant with its 95% interval, on a log axis over the ±1% \
         band and what two builds of identical code differ by, with the instruction ratio]({})\n",
        super::forest::SVG
    );
    out += &control_section(&report.control);
    for step in &report.patches {
        out += &step_heading(step, "");
        out += &patch_table(step);
    }
    out += "\n### In a generation loop\n\n";
    if let Some(whole) = &report.decode {
        out += &format!(
            "{} decoding {} tokens after the report's prompt on the CPU, each picked by one \
             side's `sample` from the model's logits; the prefill is not timed. Medians over \
             {} paired rounds, each generating once per side, rotating which goes first; \
             ratios per token with their 95% bootstrap interval. Each token costs its side one \
             forward pass at the same position, so \"sampler's time only\" compares a token's \
             time before with that time less what the sampler saves, which leaves out the \
             forward pass, whose time varies from one generation to the next, even within a \
             round, by far more than a sampler's share of a token; the verdict, by the same \
             rule, is on that ratio. A cell reads: ms per token (tokens per second), the \
             sampler's share of a token.\n\nThe published crates against the whole series:\n\n",
            report.model, report.decode_tokens, report.decode_rounds
        );
        out += &table(whole, &DECODE_COLUMNS);
        out += &format!(
            "\n![Each round's ms per token on each side, a panel per comparison, with the \
             sampler's ms per token as a bar hung from each side's median]({})\n",
            super::strip::SVG
        );
        for step in report.patches.iter().filter(|s| !s.decode.is_empty()) {
            out += &step_heading(step, ", for what it makes faster per call");
            out += &table(&step.decode, &DECODE_COLUMNS);
        }
    } else {
        out += "Not run: the decode loop needs the model: bash ci/fetch-model.sh\n";
    }
    if !profile.is_empty() {
        out += "\n### Upstream's cost profile (CPU, 49152 tokens)\n\nWhat each step of a `sample` \
                call costs alone: the floor for the next performance work.\n\n";
        let columns: &[Column<(String, f64)>] = &[
            ("step", "---", |(step, _)| step.clone()),
            ("median", "---:", |(_, ns)| show_time(*ns)),
        ];
        out += &table(profile, columns);
    }
    out
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
