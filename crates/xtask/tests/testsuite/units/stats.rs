//! The unit tests of `bench_report/stats`.

use anyhow::Result;
use xtask::report::stats::*;

fn paired(ratio: f64, low: f64, high: f64) -> Paired {
    let mut paired = Paired::of(&[(1.0, 1.0)]);
    (paired.ratio, paired.low, paired.high) = (ratio, low, high);
    paired
}

fn text(ratio: f64, low: f64, high: f64) -> String {
    paired(ratio, low, high).verdict_text()
}

#[test]
fn verdicts_follow_the_rule() {
    assert_eq!(text(1.004, 0.998, 1.012), "no measurable cost");
    assert_eq!(text(1.004, 1.001, 1.008), "within ±1%: slower by 0.4%");
    assert_eq!(text(0.993, 0.992, 0.995), "within ±1%: faster by 0.7%");
    assert_eq!(text(1.03, 1.02, 1.04), "slower by 3.0%");
    assert_eq!(text(1.012, 1.005, 1.02), "slower by 1.2%");
    assert_eq!(text(0.9, 0.85, 0.95), "faster by 10.0%");
}

#[test]
fn instructions_weigh_the_verdict() {
    let mut slower = Paired::of(&[(100.0, 103.0), (100.0, 103.5), (100.0, 102.5)]);
    assert_eq!(slower.verdict(), Verdict::Slower);
    slower.weigh(Some(1.0004), None);
    assert_eq!(
        slower.verdict_text(),
        "same instructions; slower by 3.0% in time"
    );
    slower.weigh(Some(0.5), None);
    assert_eq!(
        slower.verdict_text(),
        "fewer instructions; slower by 3.0% in time"
    );
    slower.weigh(Some(1.2), None);
    assert_eq!(slower.verdict_text(), "slower by 3.0%");
    let mut same = Paired::of(&[(100.0, 100.0), (100.0, 100.5), (100.0, 99.5)]);
    same.weigh(Some(1.0), None);
    assert_eq!(same.verdict_text(), "no measurable cost");
    let mut faster = Paired::of(&[(100.0, 85.0), (100.0, 85.5), (100.0, 84.5)]);
    faster.weigh(Some(1.0119), None);
    assert_eq!(
        faster.verdict_text(),
        "more instructions; faster by 15.0% in time"
    );
}

/// The numbers: `top_p` read 1.08 to 1.09 of the time in steps that leave its
/// instructions as they were, while the published build itself was the one that landed fast.
#[test]
fn a_difference_that_the_a_a_pair_shows_too_is_not_counted() {
    let control = paired(1.06, 1.05, 1.07);
    let placement = Placement::of(&control);
    // 1.07 squared; below 1, its inverse.
    assert_eq!(placement.range(), "0.873 to 1.145");
    let weighed = |step: Paired, instructions: f64, control: Option<&Paired>| {
        let mut step = step;
        step.weigh(Some(instructions), control);
        (step.work, step.verdict_text())
    };
    let explained = (
        Some(Work::Placement),
        "same instructions; within what two builds of the same code differ by".to_string(),
    );
    let step = paired(1.08, 1.07, 1.09);
    assert_eq!(weighed(step.clone(), 1.0000, Some(&control)), explained);
    // Faster by as much is placement too: a build can land better as well as worse.
    assert_eq!(
        weighed(paired(0.9, 0.89, 0.91), 1.0, Some(&control)),
        explained
    );
    // Beyond the range in either direction, the same instructions still cost or gain time.
    assert_eq!(
        weighed(paired(1.2, 1.19, 1.21), 0.9999, Some(&control)),
        (
            Some(Work::SameInstructions),
            "same instructions; slower by 20.0% in time".to_string()
        )
    );
    assert_eq!(
        weighed(paired(0.85, 0.84, 0.86), 1.0, Some(&control)),
        (
            Some(Work::SameInstructions),
            "same instructions; faster by 15.0% in time".to_string()
        )
    );
    // An A/A pair that shows no difference explains none.
    let alike = paired(1.0, 0.998, 1.003);
    assert_eq!(Placement::of(&alike).range(), "0.994 to 1.007");
    assert_eq!(
        weighed(step.clone(), 1.0, Some(&alike)).1,
        "same instructions; slower by 8.0% in time"
    );
    // The pair speaks only where the instructions are the same: more of them are a cost.
    assert_eq!(
        weighed(step.clone(), 1.03, Some(&control)),
        (None, text(1.08, 1.07, 1.09))
    );
    // Without the pair, the difference is given with its instructions, as before.
    assert_eq!(weighed(step, 1.0, None).0, Some(Work::SameInstructions));
}

#[test]
fn intervals_are_printed_rounded_outwards() {
    let mut paired = Paired::of(&[(1.0, 1.0)]);
    (paired.ratio, paired.low, paired.high) = (0.992, 0.98962, 0.99812);
    // Rounded to the nearest, the low bound would read 0.990, inside ±1%, while the verdict
    // says faster.
    assert_eq!(paired.interval(), "0.992 (0.989 to 0.999)");
    assert_eq!(paired.verdict_text(), "faster by 0.8%");
    (paired.low, paired.high) = (0.99, 1.004);
    assert_eq!(paired.interval(), "0.992 (0.990 to 1.004)");
}

#[test]
fn paired_rounds_cancel_drift() {
    // The machine slows down threefold over the run; within each round `after` is 10% slower.
    let rounds: Vec<(f64, f64)> = (0..201)
        .map(|i| {
            let drift = 1.0 + 2.0 * i as f64 / 200.0;
            let jitter = 1.0 + ((i * 37) % 11) as f64 / 1000.0;
            (100.0 * drift, 110.0 * drift * jitter)
        })
        .collect();
    let paired = Paired::of(&rounds);
    assert!((paired.ratio - 1.105).abs() < 0.01, "{}", paired.ratio);
    assert!(paired.low <= paired.ratio && paired.ratio <= paired.high);
    assert!(paired.high - paired.low < 0.02, "{paired:?}");
    assert_eq!(paired.verdict(), Verdict::Slower);
    let same: Vec<(f64, f64)> = rounds.iter().map(|&(u, p)| (u, p / 1.1)).collect();
    assert_eq!(Paired::of(&same).verdict(), Verdict::NoMeasurableCost);
}

#[test]
fn rounds_are_parsed_or_refused() -> Result<()> {
    assert_eq!(
        parse_rounds("10 11 12\n12 13 14\n", 3)?,
        [[10.0, 11.0, 12.0], [12.0, 13.0, 14.0]]
    );
    assert_eq!(parse_rounds("10 11\n", 2)?, [[10.0, 11.0]]);
    assert!(parse_rounds("10 11\n", 3).is_err());
    assert!(parse_rounds("0 5 6\n", 3).is_err());
    assert!(parse_rounds("5 x 6\n", 3).is_err());
    assert!(parse_rounds("5 - 6\n", 3)?[0][1].is_nan());
    Ok(())
}

#[test]
fn callgrind_totals_are_read() -> Result<()> {
    let text = "events: Ir\nfl=x\n1 2\ntotals: 123456\n";
    assert_eq!(callgrind_total(text)?, 123456);
    assert_eq!(callgrind_total("events: Ir\nsummary: 99\n")?, 99);
    Ok(())
}
