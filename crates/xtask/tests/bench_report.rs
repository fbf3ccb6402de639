//! The bench report's parser on criterion's real output (tests/fixtures/criterion, captured from
//! this project's bench).

use std::path::Path;

use anyhow::Result;
use xtask::bench_report::{self, median, Paired};

fn fixture() -> Result<Vec<bench_report::Measurement>> {
    bench_report::read_criterion(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/criterion"),
    )
}

#[test]
fn criterions_output_is_read_as_criterion_reads_it() -> Result<()> {
    let measurements = fixture()?;
    let ids: Vec<(&str, &str, Option<&str>)> = measurements
        .iter()
        .map(|m| (m.group.as_str(), m.function.as_str(), m.value.as_deref()))
        .collect();
    assert_eq!(
        ids,
        [
            ("cpu_argmax", "patched", Some("49152")),
            ("cpu_argmax", "upstream", Some("49152")),
            ("cpu_profile", "argmax", None),
        ]
    );
    for m in &measurements {
        // criterion's 100 samples, and our median of them is criterion's own estimate.
        assert_eq!(m.per_iteration_ns.len(), 100);
        let ours = median(&m.per_iteration_ns);
        assert!(
            (ours - m.criterion_median_ns).abs() <= 1e-9 * ours,
            "{} {}",
            ours,
            m.criterion_median_ns
        );
        assert!(
            ours > 1_000.0 && ours < 1_000_000.0,
            "{ours} ns for ArgMax over 49152 logits"
        );
    }
    Ok(())
}

#[test]
fn the_report_pairs_and_renders_them() -> Result<()> {
    let mut rows = bench_report::rows(&fixture()?);
    assert_eq!(rows.len(), 1);
    let row = &mut rows[0];
    assert_eq!(
        (
            row.device.as_str(),
            row.comparison.as_str(),
            row.vocab.as_str()
        ),
        ("cpu", "argmax", "49152")
    );
    row.paired = Some(Paired::of(&[(100.0, 101.0), (100.0, 99.5), (102.0, 102.0)]));
    row.instructions = Some(1.0004);
    row.fixes_ns = Some(30_500.0);
    row.fixes = Some(Paired::of(&[(100.0, 50.0), (100.0, 49.0), (100.0, 51.0)]));
    row.fixes_instructions = Some(0.5);
    row.floor_ns = Some(row.patched_ns / 4.0);
    let provenance = bench_report::Provenance {
        machine: "a machine".into(),
        crate_label: "candle-transformers 0.11.1".into(),
        patches: vec!["0001".into()],
        commit: "abc".into(),
        date: "2026-11-29".into(),
        settings: bench_report::Settings::parse(
            r#"{"model": "SmolLM2-135M-Instruct.Q4_1.gguf", "vocab": 49152, "seed": 42, "temperature": 0.8, "sides": ["upstream", "fixes", "patched"], "decode_tokens": 32, "model_on_disk": true}"#,
        )?,
    };
    let decode = bench_report::Decoding::Measured(vec![bench_report::Decode {
        comparison: "top_p".into(),
        sides: vec![(29.0, 0.05), (28.9, 0.05), (27.6, 0.004)],
        patched: Paired::of(&[(29.0, 27.6), (29.2, 27.7), (28.8, 27.5)]),
        speed: Some(Paired::of(&[(28.9, 27.6), (29.1, 27.7), (28.7, 27.5)])),
        speed_sampler: Some(Paired::of(&[(28.9, 27.8), (29.1, 28.0), (28.7, 27.6)])),
    }]);
    let report = bench_report::render(&rows, &[("argmax".into(), 30_000.0)], &decode, &provenance);
    // The decode loop: a row per comparison, each side's time per token and sampler share.
    let decode_line = report.lines().find(|l| l.starts_with("| top_p |")).unwrap();
    assert_eq!(
        decode_line,
        "| top_p | 29.00 (34.5), 5.0% | 28.90 (34.6), 5.0% | 27.60 (36.2), 0.4% | 0.952 \
         (0.949 to 0.955) | faster by 4.8% | 0.955 (0.952 to 0.958) | faster by 4.5% | 0.962 (0.962 to 0.962) | faster by 3.8% |"
    );
    let without = bench_report::render_decode(&bench_report::Decoding::NeedsTheModel, &provenance);
    assert_eq!(
        without,
        "\n### In a generation loop\n\nNot run: the decode loop needs the model: bash \
         ci/fetch-model.sh\n"
    );
    let line = report
        .lines()
        .find(|l| l.starts_with("| argmax | 49152 | cpu |"))
        .unwrap();
    assert!(
        line.ends_with(
            "| 0.500 (0.490 to 0.510) | faster by 50.0% | 1.000 (0.995 to 1.010) | \
             no measurable cost | 0.5000, 1.0004 | 4.0 |"
        ),
        "{line}"
    );
    assert!(report.contains("| argmax | 30.0 µs |"));
    assert!(report.contains("over 3 paired rounds"));
    assert!(report.contains(
        "on SmolLM2-135M-Instruct.Q4_1.gguf's real logits (49152) and on vocabularies drawn \
         from them; seed 42, temperature 0.8"
    ));
    // Only the CPU was measured: the other devices say so.
    assert!(report.contains(
        "Devices: cpu measured; **cuda not run** (`cargo bench --features cuda` on a machine with \
         an NVIDIA GPU); **metal not run** (`cargo bench --features metal` on a Mac)."
    ));
    Ok(())
}

#[test]
fn equal_instructions_qualify_a_time_verdict() {
    let row = |vocab: &str, ratio: f64, instructions: Option<f64>| bench_report::Row {
        device: "cpu".into(),
        comparison: "top_k".into(),
        vocab: vocab.into(),
        upstream_ns: 100.0,
        fixes_ns: Some(100.0 * ratio),
        patched_ns: 100.0 * ratio,
        floor_ns: None,
        paired: Some(Paired::of(&[(100.0, 100.0 * ratio); 5])),
        fixes: Some(Paired::of(&[(100.0, 100.0 * ratio); 5])),
        instructions,
        fixes_instructions: instructions,
        speed: None,
        round_ns: Vec::new(),
    };
    let mut rows = vec![
        row("49152", 1.03, Some(0.9999)),
        row("128256", 1.07, None),
        row("32000", 1.0, None),
    ];
    bench_report::same_work(&mut rows);
    let verdicts: Vec<&str> = rows
        .iter()
        .map(|r| r.paired.as_ref().unwrap().verdict.as_str())
        .collect();
    let fixes: Vec<&str> = rows
        .iter()
        .map(|r| r.fixes.as_ref().unwrap().verdict.as_str())
        .collect();
    assert_eq!(verdicts, fixes);
    assert_eq!(
        verdicts,
        [
            "same instructions; slower by 3.0% in time",
            "same instructions; slower by 7.0% in time",
            "no measurable cost"
        ]
    );
    // Fewer instructions qualify a slower time; a faster one stays as it is.
    let mut rows = vec![row("49152", 1.05, Some(0.967)), row("32000", 0.9, None)];
    bench_report::same_work(&mut rows);
    let verdict = |i: usize| rows[i].paired.as_ref().unwrap().verdict.clone();
    assert_eq!(verdict(0), "fewer instructions; slower by 5.0% in time");
    assert_eq!(verdict(1), "faster by 10.0%");
    // More instructions keep the plain verdict.
    let mut rows = vec![row("49152", 1.03, Some(1.002))];
    bench_report::same_work(&mut rows);
    assert_eq!(rows[0].paired.as_ref().unwrap().verdict, "slower by 3.0%");
}

#[test]
fn the_chart_draws_a_panel_per_comparison() -> Result<()> {
    let row = |comparison: &str, vocab: &str, ns: f64| bench_report::Row {
        device: "cpu".into(),
        comparison: comparison.into(),
        vocab: vocab.into(),
        upstream_ns: ns,
        fixes_ns: Some(ns),
        patched_ns: ns / 10.0,
        floor_ns: Some(ns / 20.0),
        paired: None,
        fixes: None,
        instructions: None,
        fixes_instructions: None,
        speed: None,
        round_ns: Vec::new(),
    };
    let rows = [
        row("all", "32000", 150e3),
        row("all", "151936", 700e3),
        row("top_p", "32000", 900e3),
        row("top_p", "151936", 6e6),
    ];
    let svg = bench_report::chart_svg(&rows)?;
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
    for text in [
        "all",
        "top_p",
        "upstream",
        "fixes",
        "patched",
        "floor",
        "ms per call",
    ] {
        assert!(
            svg.contains(&format!(">\n{text}\n</text>")),
            "no {text} in the chart"
        );
    }
    Ok(())
}
