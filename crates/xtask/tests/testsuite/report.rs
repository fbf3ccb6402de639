//! The committed report and the patches it measured: `check` names a patch changed since, and
//! `pr` leaves that patch's numbers out, as do the steps that build on it.

use std::collections::BTreeMap;
use xtask::series::Series;

use anyhow::{Context, Result};
use xtask::report::data::{Report, Step, StepRow};
use xtask::report::stats::Paired;

use crate::common;

/// A report with a step per patch of `steps` (number, what it builds on), measured on `hashes`.
fn report(steps: &[(&str, &str)], hashes: BTreeMap<String, String>) -> Report {
    let rounds: Vec<(f64, f64)> = (0..21).map(|i| (100.0, 100.0 + i as f64 / 10.0)).collect();
    let step = |(patch, before): &(&str, &str)| Step {
        after: patch.to_string(),
        subject: format!("generation: Patch {patch}"),
        before: before.to_string(),
        rows: vec![StepRow {
            comparison: "top_p".to_string(),
            before_ns: 2.0e6,
            after_ns: 2.0e6,
            paired: Paired::of(&rounds),
            instructions: Some(1.0),
        }],
        decode: Vec::new(),
    };
    let control = Step {
        rows: vec![step(&("control", "published")).rows.remove(0)],
        ..Step::control()
    };
    let mut report = common::report(control, steps.iter().map(step).collect());
    report.commands = vec!["cargo bench".to_string()];
    report.patch_hashes = hashes;
    report
}

fn hashes(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let pair = |(n, h): &(&str, &str)| (n.to_string(), h.to_string());
    pairs.iter().map(pair).collect()
}

#[test]
fn a_changed_patch_loses_its_step_and_so_do_the_steps_on_it() {
    let steps = [
        ("0001", "published"),
        ("0002", "0001"),
        ("0003", "published"),
    ];
    let measured = hashes(&[("0001", "a"), ("0002", "b"), ("0003", "c")]);
    let mut current = report(&steps, measured.clone());
    current.keep_current(&measured);
    assert_eq!(current.stale, Vec::<String>::new());
    assert_eq!(current.patches.len(), 3);

    let mut one_changed = report(&steps, measured.clone());
    one_changed.keep_current(&hashes(&[("0001", "a"), ("0002", "b"), ("0003", "x")]));
    assert_eq!(one_changed.stale, ["0003"]);
    let kept: Vec<&str> = one_changed.patches.iter().map(|s| &*s.after).collect();
    assert_eq!(kept, ["0001", "0002"]);

    // 0002's point holds 0001's change, so a new 0001 makes 0002's numbers stale too.
    let mut parent_changed = report(&steps, measured.clone());
    parent_changed.keep_current(&hashes(&[("0001", "x"), ("0002", "b"), ("0003", "c")]));
    assert_eq!(parent_changed.stale, ["0001", "0002"]);

    // A patch the report never measured, and one it measured that is gone, count as changed.
    let added = hashes(&[("0001", "a"), ("0002", "b"), ("0003", "c"), ("0004", "d")]);
    assert_eq!(report(&steps, measured.clone()).changed(&added), ["0004"]);
    let gone = hashes(&[("0001", "a"), ("0002", "b")]);
    assert_eq!(report(&steps, measured).changed(&gone), ["0003"]);
}

#[test]
fn check_names_a_patch_changed_since_the_committed_report() -> Result<()> {
    let workspace = common::workspace()?;
    let layout = &workspace.layout;
    // Mails whose messages parse, as `Series::load` requires; only their bytes matter here.
    let mail = |body: &str| {
        let head = "From: A <a@b.c>\nDate: Thu, 1 Jan 1970 00:00:00 +0000\nSubject: [PATCH] a";
        format!("{head}\n\n{body}\n").into_bytes()
    };
    workspace.add_patch("0001-generation-One.patch", &mail("one"))?;
    workspace.add_patch("0002-generation-Two.patch", &mail("two"))?;
    let command =
        "Run `cargo bench -- --noplot`, then `cargo xtask bench-report --callgrind`, and commit \
                   docs/report/";
    assert_eq!(
        xtask::report::staleness(layout, &Series::load(&layout.patches())?)?.as_deref(),
        Some(&*format!("docs/report/bench-report.md did not measure these patches as they are now: 0001, 0002. {command}")),
        "no report yet"
    );
    let measured = xtask::report::patch_hashes(&Series::load(&layout.patches())?);
    let written = report(&[("0001", "published"), ("0002", "published")], measured);
    let path = xtask::report::data_path(layout);
    std::fs::create_dir_all(path.parent().context("docs/report")?)?;
    std::fs::write(&path, serde_json::to_string_pretty(&written)?)?;
    assert_eq!(
        xtask::report::staleness(layout, &Series::load(&layout.patches())?)?,
        None
    );
    let committed = xtask::report::committed(layout, &Series::load(&layout.patches())?)?
        .context("the committed report")?;
    assert_eq!((committed.patches.len(), committed.stale.len()), (2, 0));

    workspace.add_patch("0002-generation-Two.patch", &mail("two, reviewed"))?;
    assert_eq!(
        xtask::report::staleness(layout, &Series::load(&layout.patches())?)?.as_deref(),
        Some(&*format!("docs/report/bench-report.md did not measure these patches as they are now: 0002. {command}"))
    );
    // What `pr` reads: the report without 0002's step.
    let committed = xtask::report::committed(layout, &Series::load(&layout.patches())?)?
        .context("the committed report")?;
    let kept: Vec<&str> = committed.patches.iter().map(|s| &*s.after).collect();
    assert_eq!(
        (kept, committed.stale),
        (vec!["0001"], vec!["0002".to_string()])
    );
    Ok(())
}

/// A committed report that this `bench-report` cannot read is not a reason to stop: `pr` makes
/// the stack, says why the report was not read with its summary, and the bodies have no numbers;
/// `check` says the same above its warning.
#[test]
fn a_report_of_another_version_is_named_by_pr_and_by_check() -> Result<()> {
    use crate::common::stack::{candle, run_pr, stack_workspace};
    let ws = stack_workspace()?;
    let (_dir, repo) = candle()?;
    let path = xtask::report::data_path(&ws.layout);
    std::fs::create_dir_all(path.parent().context("docs/report")?)?;
    std::fs::write(&path, "{\"version\": 0}")?;
    let (console, result) = run_pr(&ws, &repo)?;
    result?;
    let said = "<workspace>/docs/report/bench-report.json is not what this `cargo xtask \
        bench-report` writes (";
    let first = console.lines().next().unwrap_or_default();
    assert!(first.starts_with(said), "{console}");
    assert!(first.ends_with("): run it again"), "{console}");
    let series = Series::load(&ws.layout.patches())?;
    let warning = xtask::report::staleness(&ws.layout, &series)?.context("a warning")?;
    let shown = ws.layout.root.display().to_string();
    let warning = warning.replace(&shown, "<workspace>");
    assert!(warning.starts_with(said), "{warning}");
    assert!(
        warning.contains("\ndocs/report/bench-report.md did not measure these patches as they are now: 0001, 0002, 0003."),
        "{warning}"
    );

    // A report that measured other contents of 0003: the summary names it, first.
    let mut measured = xtask::report::patch_hashes(&series);
    measured.insert("0003".to_string(), "another".to_string());
    let steps = [
        ("0001", "published"),
        ("0002", "0001"),
        ("0003", "published"),
    ];
    let written = report(&steps, measured);
    std::fs::write(&path, serde_json::to_string_pretty(&written)?)?;
    let (console, result) = run_pr(&ws, &repo)?;
    result?;
    let first = console.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        "0003: the benchmark report measured other contents of this patch, so its body has no \
         numbers: run `cargo bench -- --noplot`, then `cargo xtask bench-report --callgrind`",
        "{console}"
    );
    Ok(())
}
