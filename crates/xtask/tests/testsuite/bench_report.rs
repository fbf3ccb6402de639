//! The bench report from what the benches really printed: criterion's saved measurements
//! (`tests/fixtures/criterion`), `bench-driver`'s rounds and callgrind's counts
//! (`tests/fixtures/bench-driver`), captured from this project's `cargo bench` and `bench-driver`
//! as `cargo xtask bench-report --callgrind` runs it (see the README beside them). The report is compared whole with `tests/snapshots/`; after a change to
//! its text, `UPDATE_EXPECT=1 cargo test -p xtask --test testsuite bench_report::` writes them again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use xtask::bench_report::decode::Loop;
use xtask::bench_report::{self, Counts, PointRounds};
use xtask::report::data::{Report, Step};
use xtask::report::stats::{Paired, Placement, Work, SAME_INSTRUCTIONS};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn criterion() -> Result<Vec<bench_report::Measurement>> {
    bench_report::read_criterion(&fixtures().join("criterion"))
}

#[test]
fn criterions_output_is_read_as_criterion_reads_it() -> Result<()> {
    let measurements = criterion()?;
    let ids: Vec<(&str, &str, Option<&str>)> = measurements
        .iter()
        .map(|m| (m.group.as_str(), m.function.as_str(), m.value.as_deref()))
        .collect();
    assert_eq!(
        ids,
        [
            ("cpu_argmax", "published", Some("49152")),
            ("cpu_argmax", "series", Some("49152")),
            ("cpu_profile", "argmax", None),
        ]
    );
    for m in &measurements {
        // Our median of criterion's samples is criterion's own estimate.
        let ours = m.median_ns;
        let run = [&m.group, &m.function].into_iter().chain(&m.value);
        let estimates = run
            .fold(fixtures().join("criterion"), |dir, part| dir.join(part))
            .join("new/estimates.json");
        let estimates: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(estimates)?)?;
        let theirs = estimates["median"]["point_estimate"]
            .as_f64()
            .context("criterion's median")?;
        assert!((ours - theirs).abs() <= 1e-9 * ours, "{ours} {theirs}");
        assert!(
            ours > 1_000.0 && ours < 1_000_000.0,
            "{ours} ns for ArgMax over 49152 logits"
        );
    }
    let rows = bench_report::rows(&measurements);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].comparison.as_str(), rows[0].vocab.as_str()),
        ("argmax", "49152")
    );
    Ok(())
}

/// The series as it was when the rounds were captured: each patch and the point it builds on.
fn captured_series() -> Vec<Step> {
    let patch = Step::new;
    vec![
        patch(
            "0001",
            "generation: Sample greedily at temperature 0",
            "published",
        ),
        patch(
            "0002",
            "generation: Reject a NaN temperature or top-p",
            "0001",
        ),
        patch(
            "0003",
            "generation: Turn top-k off at k = 0 and top-p off at p >= 1 alike",
            "published",
        ),
        patch(
            "0004",
            "generation: Check that the logits are one row before sampling",
            "published",
        ),
        patch(
            "0005",
            "generation: Say why sampling fails instead of rand's error or panic",
            "0002",
        ),
        patch(
            "0006",
            "nn: Draw the Gumbel noise of gumbel_softmax from all of (0, 1)",
            "published",
        ),
        patch(
            "0007",
            "generation: Draw the Gumbel noise on the CPU from the processor's seed",
            "published",
        ),
        patch(
            "0008",
            "generation: Find the top-p nucleus without sorting the whole vocabulary",
            "published",
        ),
    ]
}

/// The captured `bench-driver` outputs, each named by the arguments it ran with.
fn captured(mode: &str) -> Result<Vec<(Vec<String>, String)>> {
    let dir = fixtures().join("bench-driver");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(args) = name.strip_suffix(".txt") else {
            continue;
        };
        let args: Vec<String> = args.split(' ').map(String::from).collect();
        if args[0] == mode {
            found.push((args, std::fs::read_to_string(dir.join(&name))?));
        }
    }
    found.sort();
    Ok(found)
}

/// The instructions per call that `bench-report --callgrind` printed, a line per comparison and
/// point: `callgrind <comparison> <point>: <count> instructions per call`.
fn captured_counts() -> Result<Counts> {
    let text = std::fs::read_to_string(fixtures().join("bench-driver/callgrind.txt"))?;
    let mut counts = Counts::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [_, comparison, point, count, ..] = words[..] else {
            anyhow::bail!("`{line}` is not a count");
        };
        let point = point.trim_end_matches(':').to_string();
        counts.insert((comparison.to_string(), point), count.parse()?);
    }
    Ok(counts)
}

/// The captured rounds per call of each comparison, by point.
fn captured_rounds() -> Result<BTreeMap<String, PointRounds>> {
    let mut rounds = BTreeMap::new();
    for (args, output) in captured("pair")? {
        // pair <comparison> <vocab> <rounds> <calls> <device> <point>...
        let calls: u64 = args[4].parse()?;
        rounds.insert(
            args[1].clone(),
            bench_report::per_call(&args[6..], &output, calls)?,
        );
    }
    Ok(rounds)
}

/// The captured decode loops, each as `bench-driver decode` printed its rounds.
fn captured_loops() -> Result<Vec<Loop>> {
    let mut loops = Vec::new();
    for (args, output) in captured("decode")? {
        // decode <comparison> <rounds> <tokens> <point>...
        let points = args[4..].to_vec();
        loops.push(Loop {
            comparison: args[1].clone(),
            rounds: xtask::report::stats::parse_rounds(&output, 2 * points.len())?,
            points,
            tokens: args[3].parse()?,
        });
    }
    Ok(loops)
}

/// The report as `bench-report` assembles it, from the captured rounds and counts.
fn report_of(with_model: bool) -> Result<Report> {
    let rounds = captured_rounds()?;
    let mut control = Step::control();
    let mut steps = captured_series();
    bench_report::steps(&mut control, &mut steps, &rounds, &captured_counts()?);
    let mut whole = Vec::new();
    for decode in captured_loops()? {
        assert_eq!(
            decode.points,
            bench_report::decode_points(&decode.comparison, &steps),
            "the points the report decodes with"
        );
        let between = |before: &str, after: &str| decode.between(before, after);
        whole.push(between("published", "series")?);
        for step in steps.iter_mut() {
            if bench_report::faster(step, &decode.comparison) {
                step.decode.push(between(&step.before, &step.after)?);
            }
        }
    }
    Ok(Report {
        version: xtask::report::data::VERSION,
        machine: "AMD EPYC, 2 threads, linux x86_64".to_string(),
        date: "2026-12-02".to_string(),
        commit: "captured".to_string(),
        crate_label: "candle-transformers 0.11.1 and candle-nn 0.11.1".to_string(),
        model: "SmolLM2-135M-Instruct.Q4_1.gguf".to_string(),
        vocab: 49152,
        seed: 42,
        temperature: 0.8,
        rounds: bench_report::ROUNDS,
        short: false,
        commands: vec![
            "cargo bench -- --noplot".to_string(),
            "cargo xtask bench-report --callgrind".to_string(),
        ],
        patch_hashes: steps
            .iter()
            .map(|s| (s.after.clone(), shared::sha256_hex(s.after.as_bytes())))
            .collect(),
        stale: Vec::new(),
        decode_tokens: 16,
        decode_rounds: bench_report::DECODE_ROUNDS,
        control,
        patches: steps,
        decode: with_model.then_some(whole),
    })
}

#[test]
fn the_report_is_rendered_whole_from_captured_rounds() -> Result<()> {
    let report = report_of(true)?;
    let mut rows = bench_report::rows(&criterion()?);
    let pairs = captured("pair")?;
    let (args, output) = pairs
        .iter()
        .find(|(args, _)| args[1] == "argmax")
        .context("the captured rounds of argmax")?;
    let rounds = bench_report::per_call(&args[6..], output, args[4].parse()?)?;
    rows[0].paired = Some(Paired::between(&rounds["published"], &rounds["series"]));
    rows[0].control = Some(Paired::between(&rounds["published"], &rounds["control"]));
    rows[0].floor_ns = Some(rows[0].series_ns / 4.0);
    let profile = [("argmax".to_string(), 30_000.0)];
    expect_test::expect_file!["../snapshots/bench-report.md"]
        .assert_eq(&xtask::report::render::report(&rows, &report, &profile)?);
    // Without the model the decode loop says why it is missing; the rest is the same.
    let without = xtask::report::render::report(&rows, &report_of(false)?, &profile)?;
    expect_test::expect_file!["../snapshots/bench-report-without-the-model.md"].assert_eq(&without);
    // The short run says so above its tables, and why it has no decode loop; the rest is the same.
    let mut short = report_of(false)?;
    short.short = true;
    let short = xtask::report::render::report(&rows, &short, &profile)?;
    let header = "**The short run** (`cargo xtask bench-report --short`): every step's verdict \
                  at 49152 tokens, with no other vocabulary and no decode loop. The full run is \
                  `cargo bench -- --noplot`, then `cargo xtask bench-report --callgrind`.\n\n";
    let expected = without
        .replacen(
            "### The whole series",
            &format!("{header}### The whole series"),
            1,
        )
        .replace(
            "Not run: the decode loop needs the model: bash ci/fetch-model.sh",
            "Not run: the short run leaves out the decode loop.",
        );
    assert_eq!(short, expected);
    // What `pr` reads back is what was written, as the same document; another version is not
    // read.
    let json = serde_json::to_string(&report)?;
    let back = Report::parse(&json)?;
    assert_eq!(
        xtask::report::render::report(&rows, &back, &profile)?,
        xtask::report::render::report(&rows, &report, &profile)?
    );
    let older = json.replacen("\"version\":1", "\"version\":0", 1);
    let err = Report::parse(&older).unwrap_err().to_string();
    assert_eq!(err, "its version is 0, and this bench-report writes 1");
    Ok(())
}

#[test]
fn each_patch_is_measured_against_the_point_it_builds_on() -> Result<()> {
    let report = report_of(true)?;
    let step = |n: &str| report.patches.iter().find(|s| s.after == n).unwrap();
    // 0002 builds on 0001, 0005 on 0002; the rest on the published crates.
    let befores: Vec<(&str, &str)> = report
        .patches
        .iter()
        .map(|s| (s.after.as_str(), s.before.as_str()))
        .collect();
    assert_eq!(
        befores,
        [
            ("0001", "published"),
            ("0002", "0001"),
            ("0003", "published"),
            ("0004", "published"),
            ("0005", "0002"),
            ("0006", "published"),
            ("0007", "published"),
            ("0008", "published")
        ]
    );
    // The nucleus patch is the one that makes top-p faster, and only it gets a decode line.
    let top_p = |n: &str| {
        step(n)
            .rows
            .iter()
            .find(|r| r.comparison == "top_p")
            .cloned()
    };
    let faster = |n: &str| {
        top_p(n).is_some_and(|r| r.paired.verdict() == xtask::report::stats::Verdict::Faster)
    };
    assert!(faster("0008"));
    assert!(!faster("0001"));
    let with_decode: Vec<&str> = report
        .patches
        .iter()
        .filter(|s| !s.decode.is_empty())
        .map(|s| s.after.as_str())
        .collect();
    assert!(with_decode.contains(&"0008"), "{with_decode:?}");
    Ok(())
}

/// The captured rounds show the issue's case: the published build of `top_p` landed fast, and
/// every other build of the same code, the control's too, reads about 1.09 of its time. The A/A
/// pair is in the report for every comparison, and no step at the same instructions shows what
/// it explains as a cost or a gain.
#[test]
fn the_captured_a_a_pair_explains_where_top_p_lands() -> Result<()> {
    let report = report_of(false)?;
    let compared: Vec<&str> = report
        .control
        .rows
        .iter()
        .map(|r| r.comparison.as_str())
        .collect();
    assert_eq!(compared, ["argmax", "temperature_0", "top_p"]);
    let aa = report
        .control
        .paired("top_p")
        .context("the A/A pair of top_p")?;
    assert_eq!(aa.interval(), "1.081 (1.075 to 1.088)");
    let mut explained = Vec::new();
    for step in &report.patches {
        for row in &step.rows {
            let control = report.control.paired(&row.comparison);
            let control = control.context("an A/A pair for every comparison")?;
            let same = row
                .instructions
                .is_some_and(|r| (r - 1.0).abs() <= SAME_INSTRUCTIONS);
            if same && Placement::of(control).explains(&row.paired) {
                let verdict = row.paired.verdict_text();
                assert!(
                    !verdict.contains("slower") && !verdict.contains("faster"),
                    "{} {}: {verdict}",
                    step.after,
                    row.comparison
                );
                if row.paired.work == Some(Work::Placement) {
                    explained.push((step.after.as_str(), row.comparison.as_str()));
                }
            }
        }
    }
    // Every step that leaves `top_p`'s instructions as they were and still moves its time.
    assert_eq!(
        explained,
        [
            ("0001", "top_p"),
            ("0002", "top_p"),
            ("0003", "top_p"),
            ("0004", "top_p"),
            ("0006", "top_p"),
            ("0007", "top_p")
        ]
    );
    Ok(())
}

/// A step faster in time by the same instructions is code placement, not the patch's gain: no
/// decode loop runs for it, and a body shows no decode line for it.
#[test]
fn the_same_or_more_instructions_are_not_a_gain_to_decode() {
    use xtask::report::data::StepRow;
    let rounds: Vec<(f64, f64)> = (0..21)
        .map(|i| (100.0, 97.0 + (i % 3) as f64 * 0.1))
        .collect();
    let row = |comparison: &str, instructions: f64| {
        let mut paired = Paired::of(&rounds);
        paired.weigh(Some(instructions), None);
        StepRow {
            comparison: comparison.to_string(),
            before_ns: 100.0,
            after_ns: 97.0,
            paired,
            instructions: Some(instructions),
        }
    };
    let step = Step {
        after: "0001".to_string(),
        subject: "generation: Sample greedily at temperature 0".to_string(),
        before: "published".to_string(),
        rows: vec![
            row("gumbel_softmax", 1.0),
            row("top_p", 0.13),
            row("all", 1.012),
        ],
        decode: Vec::new(),
    };
    assert_eq!(step.rows[0].paired.work, Some(Work::SameInstructions));
    assert!(!bench_report::faster(&step, "gumbel_softmax"));
    assert!(bench_report::faster(&step, "top_p"));
    // Faster at more instructions: the time moves against the work, and is no gain either.
    assert_eq!(step.rows[2].paired.work, Some(Work::MoreInstructions));
    assert!(!bench_report::faster(&step, "all"));
    assert_eq!(
        bench_report::decode_points("gumbel_softmax", std::slice::from_ref(&step)),
        ["published", "series"]
    );
}

/// The A/A pair decides what a difference at the same instructions is: the control reads 1.06 of
/// the published build in these rounds, as two builds of identical code can (the issue's machine
/// read the published build at 3.71 ms and every other build of the same `top_p` code at 3.92 to
/// 4.08 ms). A step at 1.08 is within that; one at 1.20 is beyond it and counts.
#[test]
fn a_step_at_the_same_instructions_counts_only_beyond_the_a_a_pair() {
    // Each side's time of one call per round, `ratio` of the published build's, within ±1%, each
    // side wobbling out of step with the others; the published build's own time is steady.
    let times = |side: i32, ratio: f64| -> Vec<f64> {
        let wobble = |i: i32| match side {
            0 => 1.0,
            _ => 1.0 + ((i * 37 + side * 5) % 21 - 10) as f64 / 1000.0,
        };
        (0..201).map(|i| 3.71e6 * ratio * wobble(i)).collect()
    };
    let points = [
        ("published", 1.0),
        ("control", 1.06),
        ("0001", 1.08),
        ("0002", 1.20),
    ];
    let top_p: PointRounds = (0..)
        .zip(&points)
        .map(|(side, (point, ratio))| (point.to_string(), times(side, *ratio)))
        .collect();
    let rounds = BTreeMap::from([("top_p".to_string(), top_p)]);
    // The same instructions on every side.
    let counts: Counts = points
        .iter()
        .map(|(point, _)| (("top_p".to_string(), point.to_string()), 9.6e6))
        .collect();
    let step = |patch: &str| Step::new(patch, "", "published");
    let (mut control, mut steps) = (Step::control(), [step("0001"), step("0002")]);
    bench_report::steps(&mut control, &mut steps, &rounds, &counts);
    let aa = control.paired("top_p").expect("the A/A pair's row");
    assert_eq!(aa.interval(), "1.060 (1.057 to 1.063)");
    assert_eq!(Placement::of(aa).range(), "0.886 to 1.129");
    let verdict = |step: &Step| {
        let paired = step.paired("top_p").expect("the step's row");
        (paired.work, paired.verdict_text())
    };
    assert_eq!(
        verdict(&steps[0]),
        (
            Some(Work::Placement),
            "same instructions; within what two builds of the same code differ by".to_string()
        )
    );
    assert_eq!(
        verdict(&steps[1]),
        (
            Some(Work::SameInstructions),
            "same instructions; slower by 20.0% in time".to_string()
        )
    );
    // Neither is a gain for the decode loop to show.
    assert!(!steps.iter().any(|step| bench_report::faster(step, "top_p")));
}

/// An element of the SVG that plotters writes: its tag, its attributes, a text's content.
#[derive(Debug)]
struct Element {
    tag: String,
    attributes: BTreeMap<String, String>,
    text: String,
}

impl Element {
    fn get(&self, name: &str) -> &str {
        self.attributes.get(name).map_or("", String::as_str)
    }

    fn number(&self, name: &str) -> f64 {
        let value = self.get(name);
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}=\"{value}\" in {self:?}"))
    }

    /// A polyline's points.
    fn points(&self) -> Vec<(f64, f64)> {
        let point = |p: &str| {
            let (x, y) = p.split_once(',').expect("x,y");
            (x.parse().unwrap(), y.parse().unwrap())
        };
        self.get("points").split_whitespace().map(point).collect()
    }

    fn is_filled_rect(&self) -> bool {
        self.tag == "rect" && self.get("fill") != "none" && self.number("opacity") > 0.0
    }
}

/// The elements of an SVG in the order they are drawn. plotters writes one element per tag, with
/// its attributes in double quotes, and a text's content before its closing tag.
fn elements(svg: &str) -> Vec<Element> {
    let mut found = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        rest = &rest[start + 1..];
        if rest.starts_with(['/', '?', '!']) {
            continue;
        }
        let end = rest.find('>').expect("a closed tag");
        let inside = rest[..end].trim_end_matches('/');
        let (tag, mut attributes_text) = inside.split_once(' ').unwrap_or((inside, ""));
        let mut attributes = BTreeMap::new();
        while let Some((name, after)) = attributes_text.split_once("=\"") {
            let (value, after) = after.split_once('"').expect("a closing quote");
            attributes.insert(name.trim().to_string(), value.to_string());
            attributes_text = after;
        }
        rest = &rest[end + 1..];
        let text = match tag {
            "text" => rest[..rest.find("</text>").expect("</text>")]
                .trim()
                .to_string(),
            _ => String::new(),
        };
        let tag = tag.to_string();
        found.push(Element {
            tag,
            attributes,
            text,
        });
    }
    found
}

/// A rectangle in pixels.
#[derive(Clone, Copy, Debug)]
struct Area {
    left: f64,
    top: f64,
    right: f64,
    bottom: f64,
}

impl Area {
    fn of_rect(rect: &Element) -> Area {
        let (left, top) = (rect.number("x"), rect.number("y"));
        Area {
            left,
            top,
            right: left + rect.number("width"),
            bottom: top + rect.number("height"),
        }
    }

    fn of_circle(circle: &Element) -> Area {
        let (x, y, r) = (circle.number("cx"), circle.number("cy"), circle.number("r"));
        Area {
            left: x - r,
            top: y - r,
            right: x + r,
            bottom: y + r,
        }
    }

    /// Where a text's glyphs can reach, from its anchor and size: a glyph of these fonts is at
    /// most 0.62 of the size wide on average, and a line the size high. A rotated text (an axis's
    /// name) stands on its anchor.
    fn of_text(text: &Element) -> Area {
        let size = text.number("font-size");
        let width = text.text.chars().count() as f64 * size * 0.62;
        let (x, y) = (text.number("x"), text.number("y"));
        if text.get("transform").contains("rotate") {
            let (left, top) = (x - size / 2.0, y - width / 2.0);
            let (right, bottom) = (x + size / 2.0, y + width / 2.0);
            return Area {
                left,
                top,
                right,
                bottom,
            };
        }
        let left = match text.get("text-anchor") {
            "end" => x - width,
            "middle" => x - width / 2.0,
            _ => x,
        };
        let top = match text.get("dy") {
            "0.76em" => y,
            "0.5ex" => y - size / 2.0,
            _ => y - size,
        };
        Area {
            left,
            top,
            right: left + width,
            bottom: top + size,
        }
    }

    fn holds(&self, inner: &Area) -> bool {
        self.left < inner.left
            && inner.right < self.right
            && self.top < inner.top
            && inner.bottom < self.bottom
    }

    fn overlaps(&self, other: &Area) -> bool {
        self.left < other.right
            && other.left < self.right
            && self.top < other.bottom
            && other.top < self.bottom
    }
}

/// The plotting areas: the frames the charts draw around them, grey and not filled.
fn frames(elements: &[Element]) -> Vec<Area> {
    let frame = |e: &&Element| e.tag == "rect" && e.get("fill") == "none";
    let grey = |e: &&Element| e.get("stroke") == "#969696";
    elements
        .iter()
        .filter(frame)
        .filter(grey)
        .map(Area::of_rect)
        .collect()
}

/// Every mark can be seen: each circle lies wholly inside a plotting area, no text (a legend's,
/// a label's, a title's) reaches over one, no filled rectangle is drawn over one, and none is
/// drawn wholly over an earlier one.
fn assert_every_mark_visible(svg: &str) {
    let elements = elements(svg);
    let frames = frames(&elements);
    let texts: Vec<(Area, &str)> = elements
        .iter()
        .filter(|e| e.tag == "text")
        .map(|e| (Area::of_text(e), e.text.as_str()))
        .collect();
    assert!(!frames.is_empty(), "no plotting area is framed");
    for (i, element) in elements.iter().enumerate() {
        if element.tag != "circle" {
            continue;
        }
        let mark = Area::of_circle(element);
        assert!(
            frames.iter().any(|frame| frame.holds(&mark)),
            "{element:?} is not inside a plotting area"
        );
        for (area, text) in &texts {
            assert!(!area.overlaps(&mark), "`{text}` covers {element:?}");
        }
        for later in &elements[i + 1..] {
            if later.is_filled_rect() {
                let area = Area::of_rect(later);
                assert!(!area.overlaps(&mark), "{later:?} covers {element:?}");
            }
            if later.tag == "circle" {
                let (dx, dy) = (
                    later.number("cx") - element.number("cx"),
                    later.number("cy") - element.number("cy"),
                );
                let reach = (dx * dx + dy * dy).sqrt() + element.number("r");
                assert!(
                    reach > later.number("r"),
                    "{later:?} hides {element:?} whole"
                );
            }
        }
    }
}

/// The pixel a value lies at on an axis, from two of its ticks (value, pixel): `log` for a log
/// axis.
fn axis_from(ticks: &[(f64, f64)], log: bool) -> impl Fn(f64) -> f64 {
    assert!(ticks.len() >= 2, "an axis needs two ticks, has {ticks:?}");
    let scale = move |v: f64| if log { v.ln() } else { v };
    let ((v0, p0), (v1, p1)) = (ticks[0], ticks[ticks.len() - 1]);
    move |v| p0 + (scale(v) - scale(v0)) / (scale(v1) - scale(v0)) * (p1 - p0)
}

/// Every step's panel of the captured report, and the whole series': one row per variant, each
/// interval's ends, its ratio, its instruction ratio and both bands where the log axis drawn
/// under them puts those numbers.
#[test]
fn the_forest_plot_draws_each_interval_where_its_numbers_say() -> Result<()> {
    use xtask::report::forest;
    let report = report_of(true)?;
    let whole =
        bench_report::whole_series(&report.control, &captured_rounds()?, &captured_counts()?);
    // The whole series in the same rounds as the steps: 0008's nucleus makes its top_p faster.
    let compared: Vec<&str> = whole.rows.iter().map(|r| r.comparison.as_str()).collect();
    assert_eq!(compared, ["argmax", "temperature_0", "top_p"]);
    let verdict = whole.paired("top_p").map(Paired::verdict);
    assert_eq!(verdict, Some(xtask::report::stats::Verdict::Faster));
    let steps: Vec<&Step> = std::iter::once(&whole).chain(&report.patches).collect();
    for step in &steps {
        let svg = forest::svg(&[step], &report.control)?;
        assert_every_mark_visible(&svg);
        let elements = elements(&svg);
        let frames = frames(&elements);
        let [frame] = frames[..] else {
            panic!("{}: {} plotting areas", step.after, frames.len());
        };
        let name = step.after.as_str();
        // One row per variant, named left of the plotting area, in the step's order.
        let texts = elements.iter().filter(|e| e.tag == "text");
        let named: Vec<&str> = texts
            .clone()
            .filter(|t| t.get("text-anchor") == "end" && t.number("x") < frame.left)
            .map(|t| t.text.as_str())
            .collect();
        let variants: Vec<&str> = step.rows.iter().map(|r| r.comparison.as_str()).collect();
        assert_eq!(named, variants, "{name}");
        // The log axis from its own tick labels under the plotting area.
        let under = |t: &&Element| {
            let y = t.number("y");
            t.get("text-anchor") == "middle" && y > frame.bottom && y < frame.bottom + 20.0
        };
        let ticks: Vec<(f64, f64)> = texts
            .filter(under)
            .map(|t| (t.text.parse::<f64>().unwrap(), t.number("x")))
            .collect();
        assert!(
            ticks.iter().any(|(v, _)| *v == 1.0),
            "{name}: no tick at 1.0"
        );
        let x_of = axis_from(&ticks, true);
        let at = |x: f64, ratio: f64| (x - x_of(ratio)).abs() <= 1.5;
        let inside = |y: f64| frame.top < y && y < frame.bottom;
        // Each row's interval: a horizontal bar, in row order.
        let bars: Vec<Vec<(f64, f64)>> = elements
            .iter()
            .filter(|e| e.tag == "polyline")
            .map(Element::points)
            .filter(|p| p.len() == 2 && p[0].1 == p[1].1 && inside(p[0].1))
            .collect();
        assert_eq!(bars.len(), step.rows.len(), "{name}: a bar per row");
        let dots: Vec<&Element> = elements.iter().filter(|e| e.tag == "circle").collect();
        assert_eq!(dots.len(), step.rows.len(), "{name}: a ratio per row");
        let filled: Vec<Area> = elements
            .iter()
            .filter(|e| e.is_filled_rect())
            .map(Area::of_rect)
            .collect();
        // The ±1% band, the whole height of the plotting area.
        let one_percent = |a: &&Area| {
            at(a.left, 0.99) && at(a.right, 1.01) && a.top == frame.top && a.bottom == frame.bottom
        };
        assert!(
            filled.iter().any(|a| one_percent(&a)),
            "{name}: no ±1% band"
        );
        for (row, (bar, dot)) in step.rows.iter().zip(bars.iter().zip(&dots)) {
            let (paired, variant) = (&row.paired, &row.comparison);
            assert!(
                at(bar[0].0, paired.low) && at(bar[1].0, paired.high),
                "{name} {variant}: {bar:?} for {paired:?}"
            );
            assert!(
                at(dot.number("cx"), paired.ratio),
                "{name} {variant}: {dot:?}"
            );
            assert_eq!(
                dot.number("cy"),
                bar[0].1,
                "{name} {variant}: the ratio on its bar"
            );
            // The range the A/A pair explains, within the row.
            let control = report.control.paired(variant).context("an A/A pair")?;
            let placement = Placement::of(control);
            let band = |a: &&Area| {
                at(a.left, placement.low)
                    && at(a.right, placement.high)
                    && a.top < bar[0].1
                    && bar[0].1 < a.bottom
            };
            assert!(
                filled.iter().any(|a| band(&a)),
                "{name} {variant}: no A/A band"
            );
            // The instruction ratio, an open diamond centred below the bar.
            let instructions = row.instructions.context("callgrind counted every row")?;
            let diamond = |p: &Vec<(f64, f64)>| {
                p.len() == 5
                    && at(p[0].0, instructions)
                    && p[0].1 > bar[0].1
                    && p[2].1 < bar[0].1 + ROW_HALF
            };
            let diamonds = elements
                .iter()
                .filter(|e| e.tag == "polyline")
                .map(Element::points);
            assert_eq!(
                diamonds.filter(diamond).count(),
                1,
                "{name} {variant}: instructions"
            );
        }
    }
    // The report's figure: the whole series' panel, then one per patch.
    let figure = forest::report_svg(&report, &whole)?;
    assert_every_mark_visible(&figure);
    assert_eq!(frames(&elements(&figure)).len(), 1 + report.patches.len());
    Ok(())
}

/// Half a row of the forest plot: the instruction diamond lies below the bar, within its row.
const ROW_HALF: f64 = 16.0;

/// The PNG that a pull request's description shows: the SVG's size at twice the pixels, text
/// drawn with the font it carries, and each ratio's dot where the SVG puts it, in its colour.
#[test]
fn a_steps_png_is_its_svg_with_its_text() -> Result<()> {
    use xtask::report::forest;
    let report = report_of(true)?;
    let step = report
        .patches
        .iter()
        .find(|s| s.after == "0008")
        .context("0008")?;
    let svg = forest::svg(&[step], &report.control)?;
    let pixel = assert_dots_in_their_colours(&svg)?;
    // The title is drawn: without a font, resvg would leave its line blank.
    let title = elements(&svg)
        .into_iter()
        .find(|e| e.tag == "text")
        .context("a title")?;
    let (x, y) = (title.number("x"), title.number("y"));
    let dark = (0..300)
        .flat_map(|dx| (0..14).map(move |dy| (x + dx as f64, y + dy as f64)))
        .filter(|&(x, y)| pixel(x, y).0 < 100)
        .count();
    assert!(
        dark > 200,
        "{dark} dark pixels in the title `{}`",
        title.text
    );
    Ok(())
}

/// Renders `svg` as `forest::png` does and checks the PNG: the SVG's size at `PNG_SCALE` times
/// the pixels, and each dot in its colour where the SVG puts it. Returns the PNG's colour at an
/// SVG pixel.
fn assert_dots_in_their_colours(svg: &str) -> Result<impl Fn(f64, f64) -> (u8, u8, u8)> {
    use xtask::report::forest;
    let pixmap = resvg::tiny_skia::Pixmap::decode_png(&forest::png(svg)?)?;
    let root = &elements(svg)[0];
    let scale = forest::PNG_SCALE as f64;
    assert_eq!(
        (pixmap.width() as f64, pixmap.height() as f64),
        (root.number("width") * scale, root.number("height") * scale)
    );
    let pixel = move |x: f64, y: f64| {
        let p = pixmap
            .pixel((x * scale) as u32, (y * scale) as u32)
            .unwrap();
        (p.red(), p.green(), p.blue())
    };
    for dot in elements(svg).iter().filter(|e| e.tag == "circle") {
        let fill = dot.get("fill").trim_start_matches('#');
        let channel = |i: usize| u8::from_str_radix(&fill[i..i + 2], 16).unwrap();
        let (r, g, b) = pixel(dot.number("cx"), dot.number("cy"));
        let near = |a: u8, b: u8| a.abs_diff(b) <= 8;
        assert!(
            near(r, channel(0)) && near(g, channel(2)) && near(b, channel(4)),
            "{dot:?}: {r} {g} {b}"
        );
    }
    Ok(pixel)
}
