//! `--help` of `cargo xtask` and of each command, whole, from the one declaration that also
//! parses them (bless with `UPDATE_EXPECT=1 cargo test -p xtask --test testsuite help::`).

use clap::{CommandFactory, Parser};
use xtask::flags::Command;

#[test]
fn the_declaration_is_consistent() {
    Command::command().debug_assert();
}

#[test]
fn every_command_answers_help() {
    let mut cli = Command::command();
    let mut text = format!("{}\n", cli.render_long_help());
    let names: Vec<String> = cli
        .get_subcommands()
        .map(|command| command.get_name().to_string())
        .collect();
    for name in names {
        // Parsed as a user types it, so that the usage line carries `cargo xtask`.
        let help = Command::try_parse_from(["cargo xtask", &name, "--help"]).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
        text.push_str(&format!(
            "---- cargo xtask {name} --help\n{}\n",
            help.render()
        ));
    }
    expect_test::expect_file!["../snapshots/help.txt"].assert_eq(&text);
}

#[test]
fn flags_parse_into_the_commands_options() {
    let command = Command::try_parse_from([
        "cargo xtask",
        "pr",
        "--candle",
        "../candle",
        "--patches",
        "0001,0003",
        "--verify",
    ])
    .unwrap();
    let Command::Pr(options) = command else {
        panic!("`pr` parsed as {command:?}");
    };
    assert_eq!(options.candle.unwrap().to_str(), Some("../candle"));
    assert_eq!(options.patches, ["0001", "0003"]);
    assert_eq!(options.base, "main");
    assert!(options.verify && !options.force_branch);
}

#[test]
fn an_unknown_flag_is_refused_with_its_name() {
    let err = Command::try_parse_from(["cargo xtask", "vendor", "--branch", "x"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
    assert!(err.to_string().contains("--branch"), "{err}");
}
