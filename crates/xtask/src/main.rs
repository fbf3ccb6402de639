//! `cargo xtask`: parses the command line (`flags`) and dispatches to the command's module.

use std::process::ExitCode;

use clap::Parser;
use xtask::flags::Command;
use xtask::project::Layout;
use xtask::{bench_report, check, fetch, format_patch, metal, pr, vendor};

fn main() -> ExitCode {
    let layout = Layout::workspace();
    shared::exit(match Command::parse() {
        Command::Fetch => fetch::run(&layout),
        Command::Vendor(options) => vendor::run(&layout, &options),
        Command::Check => check::run(&layout),
        Command::BenchReport(options) => bench_report::run(&layout, &options),
        Command::Pr(options) => pr::run(&layout, &options),
        Command::MetalCheck => metal::run(&layout),
        Command::FormatPatch(options) => format_patch::run(&layout, &options),
    })
}
