//! The report as Markdown: the whole series against the published crates, one table per patch,
//! the decode loop, and upstream's cost profile. Every table is made from one list of columns.

use shared::bench::{TOP_K, TOP_P};

use super::data::{Decode, PatchStep, Report};
use super::stats::{CONFIDENCE, UNRESOLVED_WIDTH};
use super::Row;

/// A Markdown table: a header and an alignment per column, then each row's cells.
fn table(columns: &[(&str, &str)], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
    let aligns: Vec<&str> = columns.iter().map(|(_, align)| *align).collect();
    let mut out = format!("| {} |\n|{}|\n", names.join(" | "), aligns.join("|"));
    for row in rows {
        debug_assert_eq!(row.len(), columns.len());
        out += &format!("| {} |\n", row.join(" | "));
    }
    out
}

pub fn show_time(ns: f64) -> String {
    match ns {
        ns if ns >= 1e6 => format!("{:.2} ms", ns / 1e6),
        ns if ns >= 1e3 => format!("{:.1} µs", ns / 1e3),
        ns => format!("{ns:.0} ns"),
    }
}

/// The whole report.
pub fn report(rows: &[Row], report: &Report, profile: &[(String, f64)]) -> String {
    let mut out = "## Sampling cost\n\n".to_string();
    out += &format!(
        "{}; workspace commit {}; {}. Machine: {}.\n\n",
        report.crate_label, report.commit, report.date, report.machine
    );
    out += &whole_series(rows, report);
    out += "\n### Patch by patch\n\n";
    out += &format!(
        "Each patch's branch against the branch it builds on, or against the published crates: \
         {}. {COLUMNS}. {INSTRUCTIONS}.\n",
        setting(report, Some(Greedy::After("every branch that has 0001")))
    );
    for step in &report.patches {
        out += &step_heading(step, "");
        out += &patch_table(step);
    }
    out += &decode_section(report);
    if !profile.is_empty() {
        out += "\n### Upstream's cost profile (CPU, 49152 tokens)\n\n";
        out += "What each step of a `sample` call costs alone: the floor for the next \
                performance work.\n\n";
        let rows = profile
            .iter()
            .map(|(step, ns)| vec![step.clone(), show_time(*ns)]);
        out += &table(&[("step", "---"), ("median", "---:")], rows);
    }
    out
}

/// A patch's heading and what its table sets against what, `what` added to that sentence.
fn step_heading(step: &PatchStep, what: &str) -> String {
    format!(
        "\n#### {} {}\n\nThis is {} against {}{what}.\n\n",
        step.patch,
        step.subject,
        point(&step.patch),
        point(&step.before)
    )
}

/// What a point is, in words.
pub(crate) fn point(name: &str) -> String {
    match name {
        shared::PUBLISHED_POINT => "the published crates".to_string(),
        shared::SERIES_POINT => "the whole series".to_string(),
        number => format!("the branch of {number}"),
    }
}

/// How one `sample` call was measured and how to read a ratio; `temperature_0` says what each
/// side runs for that comparison, when the rows have it.
pub(crate) fn setting(report: &Report, temperature_0: Option<Greedy>) -> String {
    let greedy = temperature_0.map_or(String::new(), |greedy| {
        let top_k = format!("`TopK {{ k: {TOP_K}, temperature: 0.0 }}`");
        match greedy {
            Greedy::After(after) => {
                format!("; `temperature_0`: `ArgMax` on the published crates, {top_k} on {after}")
            }
            Greedy::BothSides => format!("; `temperature_0`: {top_k} on both sides"),
        }
    });
    format!(
        "one `sample` call on {}'s real logits ({} tokens), seed {}, temperature {} (`top_k`: k \
         {TOP_K}; `top_p`: p {TOP_P}; `top_k_then_top_p`: both{greedy}), both sides linking the \
         same candle-core; ratios are after over before, the median of the ratios of {} rounds, \
         each timing every build measured there in turn, rotating which goes first, with its {}% \
         bootstrap interval, rounded outwards; \"no measurable cost\" means that interval \
         contains 1.0 and is at most {UNRESOLVED_WIDTH:.2} wide, \"within ±1%\" that it lies \
         there without containing 1.0, too small a difference to count, \"not resolved\" that it \
         contains 1.0 but is wider",
        report.model,
        report.vocab,
        report.seed,
        report.temperature,
        report.rounds,
        CONFIDENCE * 100.0
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
    most likely comes from where the code lands in memory rather than from the change; \"more \
    instructions\" or \"fewer instructions\": the time moves against the work";

/// The table of one patch: what a pull request's body shows, and the instruction ratio where
/// callgrind counted.
pub(crate) fn patch_table(step: &PatchStep) -> String {
    let counted = step.rows.iter().any(|r| r.instructions.is_some());
    let mut columns = vec![
        ("variant", "---"),
        ("before", "---:"),
        ("after", "---:"),
        ("after / before", "---"),
    ];
    if counted {
        columns.push(("instructions", "---:"));
    }
    columns.push(("verdict", "---"));
    let rows = step.rows.iter().map(|row| {
        let mut cells = vec![
            format!("`{}`", row.comparison),
            show_time(row.before_ns),
            show_time(row.after_ns),
            row.paired.interval(),
        ];
        if counted {
            cells.push(row.instructions.map_or("-".into(), |r| format!("{r:.4}")));
        }
        cells.push(row.paired.verdict_text());
        cells
    });
    table(&columns, rows)
}

/// The table of the whole series against the published crates, at every vocabulary.
fn whole_series(rows: &[Row], report: &Report) -> String {
    let mut out = "### The whole series\n\n".to_string();
    out += &devices_line(rows);
    out += &format!(
        "The published crates against all {} patches: {}, and on vocabularies drawn from those \
         logits. published, series, floor: criterion's medians of one call; floor: what any \
         implementation that returns the same tokens must compute, written plainly on logits \
         already on the host (for `gumbel_softmax`, whose stream is new, one generator draw per \
         logit and one pass). {INSTRUCTIONS}.\n\n",
        report.patches.len(),
        setting(report, Some(Greedy::After("the series")))
    );
    let cells = rows.iter().map(|row| {
        let (ratio, verdict) = match &row.paired {
            Some(p) => (p.interval(), p.verdict_text()),
            None => Default::default(),
        };
        vec![
            row.comparison.clone(),
            row.vocab.clone(),
            row.device.clone(),
            show_time(row.published_ns),
            show_time(row.series_ns),
            row.floor_ns.map_or(String::new(), show_time),
            ratio,
            verdict,
            row.instructions
                .map_or(String::new(), |r| format!("{r:.4}")),
            row.floor_ns.map_or(String::new(), |floor| {
                format!("{:.1}", row.series_ns / floor)
            }),
        ]
    });
    let columns = [
        ("comparison", "---"),
        ("vocab", "---:"),
        ("device", "---"),
        ("published", "---:"),
        ("series", "---:"),
        ("floor", "---:"),
        ("series / published", "---"),
        ("verdict", "---"),
        ("instructions", "---:"),
        ("series / floor", "---:"),
    ];
    out + &table(&columns, cells)
}

/// "In a generation loop": the decode loop, the whole series and then each patch that makes a
/// comparison faster per call.
fn decode_section(report: &Report) -> String {
    let mut out = "\n### In a generation loop\n\n".to_string();
    let Some(whole) = &report.decode else {
        return out + "Not run: the decode loop needs the model: bash ci/fetch-model.sh\n";
    };
    out += &format!(
        "{} decoding {} tokens after the report's prompt on the CPU, each picked by one side's \
         `sample` from the model's logits; the prefill is not timed. Medians over {} paired \
         rounds, each generating once per side, rotating which goes first; ratios per token with \
         their 95% bootstrap interval. Each token costs its side one forward pass at the same \
         position, so \"sampler's time only\" compares a token's time before with that time less \
         what the sampler saves, which leaves out the forward pass, whose time varies from one \
         generation to the next, even within a round, by far more than a sampler's share of a \
         token; the verdict, by the same rule, is on that ratio. A cell reads: ms per token (tokens per second), the \
         sampler's share of a token.\n\n",
        report.model, report.decode_tokens, report.decode_rounds
    );
    out += "The published crates against the whole series:\n\n";
    out += &decode_table(whole);
    for step in report.patches.iter().filter(|s| !s.decode.is_empty()) {
        out += &step_heading(step, ", for what it makes faster per call");
        out += &decode_table(&step.decode);
    }
    out
}

/// One decode table: a row per comparison.
pub(crate) fn decode_table(decodes: &[Decode]) -> String {
    let side = |ms: f64, share: f64| format!("{ms:.2} ({:.1}), {:.1}%", 1e3 / ms, share * 100.0);
    let rows = decodes.iter().map(|d| {
        vec![
            format!("`{}`", d.comparison),
            side(d.before_ms, d.before_share),
            side(d.after_ms, d.after_share),
            d.per_token.interval(),
            d.sampler_only.interval(),
            d.sampler_only.verdict_text(),
        ]
    });
    let columns = [
        ("variant", "---"),
        ("before", "---"),
        ("after", "---"),
        ("after / before per token", "---"),
        ("sampler's time only", "---"),
        ("verdict", "---"),
    ];
    table(&columns, rows)
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

/// Which devices the rows measured and which were not run, so that a table without a device's
/// rows never reads as complete.
pub(crate) fn devices_line(rows: &[Row]) -> String {
    let parts: Vec<String> = DEVICES
        .iter()
        .map(
            |(device, how)| match rows.iter().any(|row| row.device == *device) {
                true => format!("{device} measured"),
                false => format!("**{device} not run** ({how})"),
            },
        )
        .collect();
    format!("Devices: {}.\n\n", parts.join("; "))
}
