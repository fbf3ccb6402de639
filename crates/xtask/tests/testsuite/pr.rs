//! `cargo xtask pr` on small repositories shaped like candle's, made from the published sources
//! (`candle-transformers/src/generation/mod.rs`, its tests, a manifest), with patches the tests
//! make themselves: a stack of three where the second needs the first and the third stands alone.

use crate::common::stack::*;
use crate::common::*;
use anyhow::{Context, Result};
use xtask::pr::facts::{parse_real_model, Facts};
use xtask::pr::render;
use xtask::pr::stack;
use xtask::pr::{self, audit};
use xtask::series::notes::{self, Notes};
use xtask::series::{self, Patch};

#[test]
fn each_patch_gets_a_branch_on_what_it_needs() -> Result<()> {
    let (temp, repo) = candle()?;
    let head_before = repo.head()?.target();
    let prepared = prepare(&repo, "main", false)?;
    let stack = &prepared.built.stack;
    let parents: Vec<Option<usize>> = stack.iter().map(|e| e.parent).collect();
    assert_eq!(parents, [None, Some(0), None]);
    let names: Vec<&str> = stack.iter().map(|e| e.branch.as_str()).collect();
    assert_eq!(
        names,
        [
            "raise-the-threshold",
            "raise-it-again",
            "test-argmax-on-ties"
        ]
    );
    let ancestors = std::iter::successors(stack[1].parent, |&i| stack[i].parent);
    assert_eq!(ancestors.collect::<Vec<_>>(), [0]);
    let children = (0..3).filter(|&i| stack[i].parent == Some(0));
    assert_eq!(children.collect::<Vec<_>>(), [1]);

    let main = repo.head()?.peel_to_commit()?.id();
    for entry in stack {
        assert_eq!(branch_tip(&repo, &entry.branch)?, entry.commit);
        let commit = repo.find_commit(entry.commit)?;
        assert_eq!(
            commit.message().ok(),
            Some(entry.patch.message.text().as_str())
        );
        // The contributor's identity, from the clone's git configuration; the patch's date.
        assert_eq!(commit.author().name().ok(), Some("Upstream"));
        assert_eq!(
            commit.committer().email().ok(),
            Some("upstream@example.com")
        );
        assert_eq!(commit.author().when().seconds(), 1_700_000_000);
        let parent = match entry.parent {
            None => main,
            Some(i) => stack[i].commit,
        };
        assert_eq!(commit.parent_ids().collect::<Vec<_>>(), [parent]);
    }
    // Branch 2 holds both threshold changes; branch 3 only its test, on the published module.
    let module_2 = String::from_utf8(blob_at(&repo, stack[1].commit, MODULE)?)?;
    assert!(module_2.contains("if v < 1e-5 { None } else { Some(v) }"));
    assert_eq!(
        blob_at(&repo, stack[2].commit, MODULE)?,
        published_generation()
    );
    let tests_3 = String::from_utf8(blob_at(&repo, stack[2].commit, TESTS)?)?;
    assert!(tests_3.ends_with("fn sample_ties() -> Result<()> {\n    Ok(())\n}\n"));

    // The user's branch and work tree are as they were.
    assert_eq!(repo.head()?.target(), head_before);
    assert_eq!(repo.head()?.shorthand().ok(), Some("main"));
    assert!(xtask::git::uncommitted(&repo, None)?.is_empty());
    assert_eq!(
        std::fs::read(temp.path().join(MODULE))?,
        published_generation()
    );
    Ok(())
}

#[test]
fn bodies_follow_candles_style_and_name_what_they_depend_on() -> Result<()> {
    let (temp, repo) = candle()?;
    let prepared = prepare(&repo, "main", false)?;
    let pins = [published()?.pin];
    let notes = notes::parse(
        "## Related pull requests\n\n- #1 touches this too.\n\n## Test plan\n\n<!-- real-model -->\n",
    )?;
    let facts = Facts {
        call_sites: prepared.call_sites.clone(),
        real_model: Some(parse_real_model(
            r#"{"model": "m.gguf (pkg==1)", "model_sha256": "ab", "logits": "model", "prompt": "Hi?", "seed": 42,
                "rows": [{"case": "TopK { k: 40, temperature: 0.0 }", "upstream": "error: rand", "patched": "66 \"R\"",
                          "points": {"published": "error: rand", "0001": "66 \"R\"", "0002": "66 \"R\"", "0003": "error: rand", "series": "66 \"R\""}}]}"#,
        )?),
        bench: None,
        rewrites: Vec::new(),
        adds_only: Vec::new(),
    };
    let command = |args: &str, cross_metal| xtask::pr::verify::Command {
        args: args.split(' ').map(String::from).collect(),
        cross_metal,
    };
    let checks = [
        xtask::pr::verify::Check {
            command: command("fmt --all -- --check", false),
            passed: true,
            seconds: 4.2,
        },
        xtask::pr::verify::Check {
            command: command(
                "check -p candle-transformers --features metal --target aarch64-apple-darwin",
                true,
            ),
            passed: true,
            seconds: 31.0,
        },
    ];
    let bodies: Vec<String> = (0..3)
        .map(|i| {
            render::body(
                &prepared.built.stack,
                i,
                &notes,
                &facts,
                &pins,
                Some(&checks),
            )
        })
        .collect::<Result<_>>()?;
    expect_test::expect_file!["../snapshots/body-checked-0001.md"].assert_eq(&bodies[0]);
    expect_test::expect_file!["../snapshots/body-checked-0002.md"].assert_eq(&bodies[1]);
    expect_test::expect_file!["../snapshots/body-checked-0003.md"].assert_eq(&bodies[2]);
    expect_test::expect_file!["../snapshots/console.txt"].assert_eq(&pr::summary::order(
        &prepared.built.stack,
        &prepared.built.stopped,
    ));
    // Nothing about the clone or this machine.
    let clone = temp.path().display().to_string();
    for body in &bodies {
        for local in [clone.as_str(), "/tmp", "target/", "xtask", "/work"] {
            assert!(!body.contains(local), "`{local}` in\n{body}");
        }
    }
    // The title is the subject, as candle squash-merges it (`Title (#N)`).
    assert_eq!(
        prepared.built.stack[1].patch.message.subject,
        "generation: Raise it again"
    );
    Ok(())
}

/// A bench report over the toy stack: the A/A pair, each patch's step with times of its own, and
/// a decode loop for the third.
fn toy_report() -> xtask::report::data::Report {
    use xtask::report::data::{Decode, Step, StepRow};
    use xtask::report::stats::Paired;
    let rounds = |ratio: f64| -> Vec<(f64, f64)> {
        (0..21)
            .map(|i| (100.0, 100.0 * ratio * (1.0 + (i % 5) as f64 / 1000.0)))
            .collect()
    };
    let step = |comparison: &str, before_ns: f64, ratio: f64| StepRow {
        comparison: comparison.to_string(),
        before_ns,
        after_ns: before_ns * ratio,
        paired: Paired::of(&rounds(ratio)),
        instructions: None,
    };
    let patch = |patch: &str, subject: &str, before: &str, rows: Vec<StepRow>| Step {
        after: patch.to_string(),
        subject: subject.to_string(),
        before: before.to_string(),
        rows,
        decode: Vec::new(),
    };
    let mut third = patch(
        "0003",
        "generation: Test argmax on ties",
        "published",
        vec![step("argmax", 31_000.0, 1.0), step("top_p", 1.37e6, 0.2)],
    );
    third.decode.push(Decode {
        comparison: "top_p".to_string(),
        before: "published".to_string(),
        after: "0003".to_string(),
        before_ms: 29.4,
        after_ms: 28.3,
        before_share: 0.047,
        after_share: 0.009,
        per_token: Paired::of(&rounds(0.962)),
        sampler_only: Paired::of(&rounds(0.961)),
    });
    crate::common::report(
        Step {
            rows: vec![
                step("argmax", 30_000.0, 1.0),
                step("temperature_0", 26_000.0, 1.0),
                step("top_p", 1.4e6, 1.06),
            ],
            ..Step::control()
        },
        vec![
            patch(
                "0001",
                "generation: Raise the threshold",
                "published",
                vec![
                    step("argmax", 30_000.0, 1.0),
                    step("temperature_0", 26_000.0, 1.0),
                    step("top_p", 1.4e6, 1.0),
                ],
            ),
            patch(
                "0002",
                "generation: Raise it again",
                "0001",
                vec![
                    step("argmax", 30_500.0, 1.03),
                    step("temperature_0", 26_000.0, 1.0),
                    step("top_p", 1.41e6, 1.0),
                ],
            ),
            third,
        ],
    )
}

/// Each branch's folder gets its step's forest plot as a PNG where the bench report measured
/// that step against the branch's parent, and the console says to attach it; without a report,
/// or for a step measured against another point, there is no picture and nothing is said.
#[test]
fn each_measured_step_gets_its_picture_and_the_console_says_to_attach_it() -> Result<()> {
    use xtask::report::forest::{self, step_png, PNG};
    let (_temp, repo) = candle()?;
    let prepared = prepare(&repo, "main", false)?;
    let report = toy_report();
    let parent =
        |entry: &stack::Entry| entry.parent.map(|p| prepared.built.stack[p].patch.number());
    for entry in &prepared.built.stack {
        assert_eq!(step_png(None, entry.patch.number(), parent(entry))?, None);
    }
    // Without a clone or --verify, with a benchmark report or not.
    let said = |pictures, bench| {
        let next = pr::summary::Next {
            clone: None,
            series: None,
            out: "target/pr".into(),
            pictures,
            bench,
            verify: false,
        };
        pr::summary::next_steps(&next, &prepared.built.stack, &[])
    };
    assert!(!said(false, false).contains(PNG));
    for entry in &prepared.built.stack {
        let png = step_png(Some(&report), entry.patch.number(), parent(entry))?;
        let png = png.context("a picture for a measured step")?;
        // The picture is the step's own panel, the one measured against the branch's parent,
        // and not blank.
        let step = report
            .patches
            .iter()
            .find(|s| s.after == entry.patch.number());
        let panel = forest::svg(&[step.context("the step")?], &report.control)?;
        assert!(
            png == forest::png(&panel)?,
            "{}: another picture",
            entry.branch
        );
        let pixmap = resvg::tiny_skia::Pixmap::decode_png(&png)?;
        let drawn = pixmap.pixels().iter().filter(|p| p.red() < 200).count();
        assert!(drawn > 2000, "{}: {drawn} drawn pixels", entry.branch);
    }
    let text = said(true, true);
    assert!(
        text.contains(&format!(
            "attach each folder's {PNG}, its step as a forest plot"
        )),
        "{text}"
    );
    // 0002 measured against the published crates, while its branch builds on 0001: no picture.
    let stale = prepared
        .built
        .stack
        .iter()
        .find(|e| e.parent.is_some())
        .context("0002")?;
    let number = stale.patch.number();
    let mut measured_elsewhere = report.clone();
    let step = measured_elsewhere
        .patches
        .iter_mut()
        .find(|s| s.after == number);
    step.context("0002's step")?.before = "published".to_string();
    assert_eq!(
        step_png(Some(&measured_elsewhere), number, parent(stale))?,
        None
    );
    Ok(())
}

/// A patch changed since the committed report gets no numbers in its body, only what to run;
/// the bodies of the patches the report measured as they are keep theirs.
#[test]
fn a_body_leaves_out_the_numbers_of_a_patch_changed_since_the_report() -> Result<()> {
    let (_temp, repo) = candle()?;
    let prepared = prepare(&repo, "main", false)?;
    let pins = [published()?.pin];
    let notes = notes::parse("## Test plan\n\n<!-- bench -->\n")?;
    let hashes = |third: &str| {
        let pairs = [("0001", "a"), ("0002", "b"), ("0003", third)];
        pairs.map(|(n, h)| (n.to_string(), h.to_string())).into()
    };
    let mut report = toy_report();
    report.patch_hashes = hashes("c");
    report.keep_current(&hashes("c, reviewed"));
    let facts = Facts {
        bench: Some(report),
        ..Facts::default()
    };
    let body = |i: usize| render::body(&prepared.built.stack, i, &notes, &facts, &pins, None);
    let third = body(2)?;
    assert!(
        third.contains(
            "(The benchmark report measured other contents of 0003: run `cargo bench -- --noplot`, then \
             `cargo xtask bench-report --callgrind`.)"
        ),
        "{third}"
    );
    assert!(
        !third.contains("| variant |") && !third.contains(" ms"),
        "{third}"
    );
    assert!(body(0)?.contains("| variant |"));
    Ok(())
}

#[test]
fn each_body_shows_its_own_evidence_and_no_other_patchs() -> Result<()> {
    let (_temp, repo) = candle()?;
    let prepared = prepare(&repo, "main", false)?;
    let pins = [published()?.pin];
    let notes = notes::parse("## Test plan\n\n<!-- real-model -->\n\n<!-- bench -->\n")?;
    let facts = Facts {
        real_model: Some(parse_real_model(
            r#"{"model": "m.gguf (pkg==1)", "model_sha256": "ab", "logits": "model", "prompt": "Hi?", "seed": 42,
                "rows": [{"case": "All { temperature: 0.0 }", "upstream": "error: rand", "patched": "66",
                          "points": {"published": "error: rand", "0001": "66", "0002": "66", "0003": "error: rand", "series": "66"}},
                         {"case": "All { temperature: 1e-6 }", "upstream": "12", "patched": "66",
                          "points": {"published": "12", "0001": "66", "0002": "66", "0003": "12", "series": "66"}},
                         {"case": "All { temperature: 3e-6 }", "upstream": "12", "patched": "12",
                          "points": {"published": "12", "0001": "12", "0002": "66", "0003": "12", "series": "66"}}]}"#,
        )?),
        bench: Some(toy_report()),
        ..Facts::default()
    };
    let bodies: Vec<String> = (0..3)
        .map(|i| render::body(&prepared.built.stack, i, &notes, &facts, &pins, None))
        .collect::<Result<_>>()?;
    expect_test::expect_file!["../snapshots/body-0001.md"].assert_eq(&bodies[0]);
    expect_test::expect_file!["../snapshots/body-0002.md"].assert_eq(&bodies[1]);
    expect_test::expect_file!["../snapshots/body-0003.md"].assert_eq(&bodies[2]);
    // Each body's times are its own step's alone.
    let own = [
        ["30.0 µs", "1.40 ms"],
        ["30.5 µs", "1.41 ms"],
        ["31.0 µs", "1.37 ms"],
    ];
    for (i, body) in bodies.iter().enumerate() {
        for (j, times) in own.iter().enumerate() {
            for time in times {
                assert_eq!(body.contains(time), i == j, "`{time}` in body {i}:\n{body}");
            }
        }
    }
    Ok(())
}

/// A step that leaves a variant's instructions as they were, slower by as much as two builds of
/// identical code differ (the A/A pair reads 1.06), is not shown as a cost; one beyond it is.
#[test]
fn a_body_never_shows_what_two_builds_of_the_same_code_differ_by_as_a_cost() -> Result<()> {
    use xtask::report::data::Report;
    let (_temp, repo) = candle()?;
    let prepared = prepare(&repo, "main", false)?;
    let pins = [published()?.pin];
    let notes = notes::parse("## Test plan\n\n<!-- bench -->\n")?;
    let mut report = toy_report();
    // Slower in time at the same instructions: by 8% for 0001, by 20% for 0003.
    // Weighed against the A/A pair as `bench-report` weighs a row when it writes the report.
    let control = report.control.clone();
    let slower = |row: &mut xtask::report::data::StepRow, ratio: f64| {
        row.paired.ratio = ratio;
        (row.paired.low, row.paired.high) = (ratio - 0.01, ratio + 0.01);
        row.instructions = Some(1.0);
        let pair = control.paired(&row.comparison);
        row.paired.weigh(row.instructions, pair);
    };
    slower(&mut report.patches[0].rows[2], 1.08);
    slower(&mut report.patches[2].rows[1], 1.2);
    // As `pr` reads it: from the JSON, as written.
    let report = Report::parse(&serde_json::to_string(&report)?)?;
    let facts = Facts {
        bench: Some(report),
        ..Facts::default()
    };
    let body = |i| render::body(&prepared.built.stack, i, &notes, &facts, &pins, None);
    let explained = body(0)?;
    assert!(
        explained.contains(
            "| `top_p` | 1.40 ms | 1.40 ms | 1.080 (1.070 to 1.090) | 1.0000 | same instructions; \
             within what two builds of the same code differ by |"
        ),
        "{explained}"
    );
    assert!(!explained.contains("slower by 8"), "{explained}");
    assert!(
        explained.contains(
            "Two builds of identical code differ in time too, by where the code lands in memory. \
             Against the published crates, the same crates compiled a second time, as a module of \
             their own, and timed in the same rounds read: `top_p` 1.062 (1.061 to 1.064), so a \
             difference at the same instructions counts only outside 0.884 to 1.131. The range \
             runs from 1/m² to m², m being the bound of the two builds' interval furthest from \
             1.0, read as a factor above 1: a branch's build can lie as far again from the second \
             build as the second lies from the first.\n"
        ),
        "{explained}"
    );
    let counted = body(2)?;
    assert!(
        counted.contains(
            "| 1.200 (1.190 to 1.210) | 1.0000 | same instructions; slower by 20.0% in time |"
        ),
        "{counted}"
    );
    Ok(())
}

#[test]
fn a_body_says_when_the_report_does_not_fit_its_branch() -> Result<()> {
    let (_temp, repo) = candle()?;
    let prepared = prepare(&repo, "main", false)?;
    let pins = [published()?.pin];
    let notes = notes::parse("## Test plan\n\n<!-- bench -->\n")?;
    let mut report = toy_report();
    report.patches.remove(0);
    report.patches[0].before = "published".to_string();
    let facts = Facts {
        bench: Some(report),
        ..Facts::default()
    };
    let body = |i| render::body(&prepared.built.stack, i, &notes, &facts, &pins, None);
    assert!(body(0)?.contains(
        "(The benchmark report has no step for 0001: run `cargo bench` and `cargo xtask \
         bench-report`.)"
    ));
    assert!(body(1)?.contains(
        "(The benchmark report measured 0002 against the published crates, but it builds on the \
         branch of 0001 now: run `cargo xtask vendor`, `cargo bench` and `cargo xtask \
         bench-report`.)"
    ));
    Ok(())
}

#[test]
fn branch_names_are_whole_words_of_at_most_40_characters() -> Result<()> {
    let name = |subject: &str| -> Result<String> {
        let message = series::parse_message(
            format!("From: A <a@b.c>\nDate: Thu, 1 Jan 1970 00:00:00 +0000\nSubject: [PATCH] {subject}\n\nBody.\n").as_bytes(),
        )?;
        Ok(stack::branch_name("", &message))
    };
    assert_eq!(
        name("generation: Sample greedily at temperature 0")?,
        "sample-greedily-at-temperature-0"
    );
    assert_eq!(
        name("generation: Say why sampling fails instead of rand's error or panic")?,
        "say-why-sampling-fails-instead-of-rands"
    );
    assert_eq!(
        name("nn: Draw the Gumbel noise of gumbel_softmax from all of (0, 1)")?,
        "draw-the-gumbel-noise-of-gumbel-softmax"
    );
    Ok(())
}

#[test]
fn the_contributor_is_the_clones_identity_or_author() -> Result<()> {
    let (_temp, repo) = candle()?;
    let signature = pr::contributor(&repo, None)?;
    assert_eq!(
        (signature.name().ok(), signature.email().ok()),
        (Some("Upstream"), Some("upstream@example.com"))
    );
    let signature = pr::contributor(&repo, Some("Zoë Contributor <zoe@example.com>"))?;
    assert_eq!(
        (signature.name().ok(), signature.email().ok()),
        (Some("Zoë Contributor"), Some("zoe@example.com"))
    );
    let Err(err) = pr::contributor(&repo, Some("nobody")) else {
        panic!("`nobody` is not `Name <email>`");
    };
    let err = err.to_string();
    assert_eq!(err, "--author must be `Name <email>`, got `nobody`");
    Ok(())
}

#[test]
fn bodies_without_results_say_so() -> Result<()> {
    let (_temp, repo) = candle()?;
    let prepared = prepare(&repo, "main", false)?;
    let pins = [published()?.pin];
    let notes = notes::parse("## Test plan\n\n<!-- bench -->\n<!-- call-sites -->\n")?;
    let body = render::body(
        &prepared.built.stack,
        0,
        &notes,
        &Facts::default(),
        &pins,
        None,
    )?;
    assert!(body.contains("candle's CI commands have not been run on this branch yet."));
    assert!(body.contains("(The benchmark table is missing: no benchmark report was found.)"));
    assert!(body
        .contains("(The call sites are listed when the text is made against a clone of candle.)"));
    let plain = render::body(
        &prepared.built.stack,
        0,
        &Notes::default(),
        &Facts::default(),
        &pins,
        None,
    )?;
    assert!(!plain.contains("(The"), "{plain}");
    Ok(())
}

/// On a base that rewrites the sampler, one sentence says why both tables are left out, at the
/// first of their markers.
#[test]
fn a_body_on_a_rewritten_base_leaves_out_both_tables_in_one_sentence() -> Result<()> {
    let (_temp, repo) = candle()?;
    let prepared = prepare(&repo, "main", false)?;
    let pins = [published()?.pin];
    let notes = notes::parse("## Test plan\n\n<!-- real-model -->\n\n<!-- bench -->\n")?;
    let facts = Facts {
        rewrites: vec!["#3496".to_string()],
        ..Facts::default()
    };
    let body = render::body(&prepared.built.stack, 0, &notes, &facts, &pins, None)?;
    let sentence = "(The real-model outcomes and the benchmarks measure this change on \
        candle-transformers 0.11.1, whose sampler this base's #3496 rewrote, so they are left out \
        here.)";
    assert_eq!(body.matches("(The").count(), 1, "{body}");
    assert!(body.trim_end().ends_with(sentence), "{body}");
    Ok(())
}

/// Where a marker's table cannot be made, one sentence says why, with what to run: the real
/// model did not run, or its table lacks the branch's column. On a rewritten base with only the
/// real-model marker, the sentence names that table alone.
#[test]
fn a_body_says_why_a_real_model_table_is_missing() -> Result<()> {
    let (_temp, repo) = candle()?;
    let prepared = prepare(&repo, "main", false)?;
    let pins = [published()?.pin];
    let notes = notes::parse("## Test plan\n\n<!-- real-model -->\n")?;
    let body = |facts: &Facts| render::body(&prepared.built.stack, 0, &notes, facts, &pins, None);
    let missing = body(&Facts::default())?;
    let said = "(The real-model table is missing: `cargo repro` did not run.)";
    assert!(missing.trim_end().ends_with(said), "{missing}");
    let without_column = Facts {
        real_model: Some(parse_real_model(
            r#"{"model": "m.gguf (pkg==1)", "model_sha256": "ab", "logits": "model", "prompt": "Hi?",
                "seed": 42, "rows": [{"case": "ArgMax", "upstream": "1", "patched": "1",
                "points": {"published": "1"}}]}"#,
        )?),
        ..Facts::default()
    };
    let no_column = body(&without_column)?;
    let said = "(The real-model table has no column for 0001 or published: run `cargo xtask \
        vendor`, then this command again.)";
    assert!(no_column.trim_end().ends_with(said), "{no_column}");
    let rewritten = Facts {
        rewrites: vec!["#3496".to_string()],
        ..Facts::default()
    };
    let left_out = body(&rewritten)?;
    let said = "(The real-model outcomes measure this change on candle-transformers 0.11.1, \
        whose sampler this base's #3496 rewrote, so they are left out here.)";
    assert!(left_out.trim_end().ends_with(said), "{left_out}");
    Ok(())
}

#[test]
fn call_sites_are_classified() {
    let text = "\
fn a(sampling: Sampling) { let p = LogitsProcessor::from_sampling(1, sampling); }
let sampling = Sampling::TopK { k, temperature };
let p = LogitsProcessor::from_sampling(2, sampling);
let sampling = if temperature <= 0. { Sampling::ArgMax } else { Sampling::All { temperature } };
let p = LogitsProcessor::from_sampling(3, sampling);
";
    let sites = audit::sites_in("x.rs", text);
    let guards: Vec<audit::Guard> = sites.iter().map(|s| s.guard).collect();
    assert_eq!(
        guards,
        [
            audit::Guard::Caller,
            audit::Guard::None,
            audit::Guard::Itself
        ]
    );
    assert_eq!(sites[1].line, 3);
}

#[test]
fn patches_picks_a_subset_in_order_and_names_what_is_missing() -> Result<()> {
    let all = stack_patches()?;
    let names =
        |picked: Vec<Patch>| -> Vec<String> { picked.into_iter().map(|p| p.file_name).collect() };
    let picked = pr::select(all.clone(), &["0003".into(), "0001".into(), "0003".into()])?;
    assert_eq!(
        names(picked.clone()),
        [
            "0001-generation-Raise-the-threshold.patch",
            "0003-generation-Test-argmax-on-ties.patch"
        ]
    );
    // The subset makes its own stack: both stand on the base.
    let (_temp, repo) = candle()?;
    let contributor = pr::contributor(&repo, None)?;
    let picked_series = series(picked, "", &[])?;
    let prepared = pr::prepare(
        &repo,
        &[published()?],
        &picked_series,
        "main",
        &contributor,
        pr::Existing::Refuse,
        &crate::common::stack::no_fallback,
    )
    .and_then(|planned| made(&repo, planned))?;
    let parents: Vec<Option<usize>> = prepared.built.stack.iter().map(|e| e.parent).collect();
    assert_eq!(parents, [None, None]);
    // The second patch alone has nothing to stand on.
    let second = pr::select(all.clone(), &["0002".into()])?;
    let err = format!(
        "{:#}",
        pr::prepare(
            &repo,
            &[published()?],
            &series(second, "x/", &[])?,
            "main",
            &contributor,
            pr::Existing::Refuse,
            &crate::common::stack::no_fallback
        )
        .and_then(|planned| made(&repo, planned))
        .unwrap_err()
    );
    assert!(
        err.contains("0002-generation-Raise-it-again.patch does not apply"),
        "{err}"
    );
    let err = pr::select(all, &["0009".into()]).unwrap_err().to_string();
    assert_eq!(err, "no patch numbered 0009 in patches/");
    Ok(())
}
