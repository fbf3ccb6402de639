//! `cargo repro --help`, whole, from the binary (bless with `UPDATE_EXPECT=1`).

use std::process::Command;

#[test]
fn repro_answers_help() {
    let output = Command::new(env!("CARGO_BIN_EXE_repro"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    expect_test::expect_file!["../snapshots/help.txt"]
        .assert_eq(&String::from_utf8(output.stdout).unwrap());
}

#[test]
fn a_bad_format_is_refused_with_the_values_it_takes() {
    let output = Command::new(env!("CARGO_BIN_EXE_repro"))
        .args(["--format", "yaml"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("invalid value 'yaml' for '--format <FORMAT>'")
            && stderr.contains("[possible values: text, json]"),
        "{stderr}"
    );
}
