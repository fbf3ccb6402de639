//! `bench-driver --help` and each command's, whole, from the binary (bless with
//! `UPDATE_EXPECT=1`).

use std::process::Command;

fn help(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_bench-driver"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn bench_driver_answers_help() {
    let mut text = help(&[]);
    for command in ["count", "pair", "decode", "settings"] {
        text.push_str(&format!(
            "---- bench-driver {command} --help\n{}",
            help(&[command])
        ));
    }
    expect_test::expect_file!["snapshots/help.txt"].assert_eq(&text);
}
