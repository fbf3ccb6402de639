//! `cargo repro` without the model, whole, from the binary: the bug report's cases on the
//! committed fixture, each with the published sampler and the patched one (bless with
//! `UPDATE_EXPECT=1`).

use std::process::{Command, Output};

/// `repro` with `args`, run to success with a target folder that holds no model, so that it falls
/// back to the committed fixture.
fn repro_on_the_fixture(args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_repro"))
        .args(args)
        .env("CARGO_TARGET_DIR", "/nonexistent/target")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    output
}

#[test]
fn without_the_model_it_runs_the_cases_on_the_fixture() {
    let output = repro_on_the_fixture(&[]);
    expect_test::expect_file!["../snapshots/fixture-run.txt"]
        .assert_eq(&String::from_utf8(output.stdout).unwrap());
}

#[test]
fn json_carries_the_table_on_stdout_and_the_rest_on_stderr() {
    let output = repro_on_the_fixture(&["--format", "json"]);
    let table: shared::repro::Table = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(table.logits, "fixture");
    // Every case carries every point, and the published point samples what upstream does.
    for row in &table.rows {
        assert_eq!(row.points.len(), points::NAMES.len(), "{row:?}");
        assert_eq!(row.points["published"], row.upstream, "{row:?}");
        assert_eq!(row.points["series"], row.patched, "{row:?}");
    }
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with("running on the committed fixture"),
        "{stderr}"
    );
}
