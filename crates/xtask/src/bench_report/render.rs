//! The report as Markdown.

use shared::bench::{TOP_K, TOP_P};

use super::data::{Decode, PatchStep, Report, Step};
use super::stats::{Paired, CONFIDENCE, UNRESOLVED_WIDTH};
use super::Row;

/// A Markdown table: `head`, its header and alignment lines, then a line of `cells` per row.
fn table<T>(head: &str, rows: &[T], cells: impl Fn(&T) -> Vec<String>) -> String {
    let line = |row| format!("| {} |\n", cells(row).join(" | "));
    head.to_string() + &rows.iter().map(line).collect::<String>()
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
    let (patch, subject, before) = (&step.patch, &step.subject, point(&step.before));
    let after = point(patch);
    format!("\n#### {patch} {subject}\n\nThis is {after} against {before}{what}.\n\n")
}

/// What a point is, in words.
pub(crate) fn point(name: &str) -> String {
    match name {
        shared::PUBLISHED_POINT => "the published crates".to_string(),
        shared::SERIES_POINT => "the whole series".to_string(),
        number => format!("the branch of {number}"),
    }
}

/// How one `sample` call was measured and how to read a ratio, and what `temperature_0` runs.
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
    most likely comes from where the code lands in memory rather than from the change; \"more \
    instructions\" or \"fewer instructions\": the time moves against the work";

/// The table of one patch, as a pull request's body shows it.
pub(crate) fn patch_table(step: &PatchStep) -> String {
    let counted = step.rows.iter().any(|r| r.instructions.is_some());
    let (column, align) = match counted {
        true => (" instructions |", "---:|"),
        false => ("", ""),
    };
    let head = format!(
        "| variant | before | after | after / before |{column} verdict |\n\
         |---|---:|---:|---|{align}---|\n"
    );
    table(&head, &step.rows, |r: &Step| {
        let mut cells = vec![
            format!("`{}`", r.comparison),
            show_time(r.before_ns),
            show_time(r.after_ns),
            r.paired.interval(),
            r.instructions.map_or("-".into(), |r| format!("{r:.4}")),
            r.paired.verdict_text(),
        ];
        if !counted {
            cells.remove(4);
        }
        cells
    })
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

pub fn report(rows: &[Row], report: &Report, profile: &[(String, f64)]) -> String {
    let measured = |device: &str| rows.iter().any(|row| row.device == device);
    let devices: Vec<String> = DEVICES
        .iter()
        .map(|(device, how)| match measured(device) {
            true => format!("{device} measured"),
            false => format!("**{device} not run** ({how})"),
        })
        .collect();
    let (devices, patches) = (devices.join("; "), report.patches.len());
    let (crate_label, commit) = (&report.crate_label, &report.commit);
    let (date, machine) = (&report.date, &report.machine);
    let measured_as = setting(report, Some(Greedy::After("the series")));
    let mut out = format!(
        "## Sampling cost\n\n{crate_label}; workspace commit {commit}; {date}. Machine: \
         {machine}.\n\n### The whole series\n\nDevices: {devices}.\n\nThe published crates against \
         all {patches} patches: {measured_as}, and on vocabularies drawn from those logits. \
         published, series, floor: criterion's medians of one call; floor: what any implementation \
         that returns the same tokens must compute, written plainly on logits already on the host \
         (for `gumbel_softmax`, whose stream is new, one generator draw per logit and one pass). \
         {INSTRUCTIONS}.\n\n"
    );
    let head = "| comparison | vocab | device | published | series | floor | series / published \
                | verdict | instructions | series / floor |\n\
                |---|---:|---|---:|---:|---:|---|---|---:|---:|\n";
    out += &table(head, rows, |r| {
        let paired = r.paired.as_ref();
        vec![
            r.comparison.clone(),
            r.vocab.clone(),
            r.device.clone(),
            show_time(r.published_ns),
            show_time(r.series_ns),
            r.floor_ns.map(show_time).unwrap_or_default(),
            paired.map(Paired::interval).unwrap_or_default(),
            paired.map(Paired::verdict_text).unwrap_or_default(),
            r.instructions
                .map(|i| format!("{i:.4}"))
                .unwrap_or_default(),
            r.floor_ns
                .map(|f| format!("{:.1}", r.series_ns / f))
                .unwrap_or_default(),
        ]
    });
    out += &format!(
        "\n### Patch by patch\n\nEach patch's branch against the branch it builds on, or against \
         the published crates: {}. {COLUMNS}. {INSTRUCTIONS}.\n",
        setting(report, Some(Greedy::After("every branch that has 0001")))
    );
    for step in &report.patches {
        out += &step_heading(step, "");
        out += &patch_table(step);
    }
    out += "\n### In a generation loop\n\n";
    match &report.decode {
        None => out += "Not run: the decode loop needs the model: bash ci/fetch-model.sh\n",
        Some(whole) => {
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
                 sampler's share of a token.\n\n",
                report.model, report.decode_tokens, report.decode_rounds
            );
            out += "The published crates against the whole series:\n\n";
            out += &decode_table(whole);
            for step in report.patches.iter().filter(|s| !s.decode.is_empty()) {
                out += &step_heading(step, ", for what it makes faster per call");
                out += &decode_table(&step.decode);
            }
        }
    }
    if !profile.is_empty() {
        out += "\n### Upstream's cost profile (CPU, 49152 tokens)\n\n";
        out += "What each step of a `sample` call costs alone: the floor for the next \
                performance work.\n\n";
        let head = "| step | median |\n|---|---:|\n";
        out += &table(head, profile, |(step, ns)| {
            vec![step.clone(), show_time(*ns)]
        });
    }
    out
}

fn decode_table(decodes: &[Decode]) -> String {
    fn side(ms: f64, share: f64) -> String {
        format!("{ms:.2} ({:.1}), {:.1}%", 1e3 / ms, share * 100.0)
    }
    let head =
        "| variant | before | after | after / before per token | sampler's time only | verdict \
                |\n|---|---|---|---|---|---|\n";
    table(head, decodes, |d| {
        vec![
            format!("`{}`", d.comparison),
            side(d.before_ms, d.before_share),
            side(d.after_ms, d.after_share),
            d.per_token.interval(),
            d.sampler_only.interval(),
            d.sampler_only.verdict_text(),
        ]
    })
}
