//! `cargo xtask`: parses the command line (`flags`) and dispatches to the command's module.

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
use xtask::flags::{Cli, Command};
use xtask::pin;
use xtask::project::Layout;
use xtask::{bench_report, check, format_patch, metal, pr, published, vendor};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> Result<()> {
    let layout = Layout::workspace();
    match command {
        Command::Fetch => published::fetch_pinned(&layout, &pin::read(&layout.pin())?),
        Command::Vendor(options) => vendor::run(&layout, &options),
        Command::Check => check::run(&layout),
        Command::BenchReport(options) => bench_report::run(&layout, &options),
        Command::Pr(options) => pr::run(&layout, &options),
        Command::MetalCheck => metal::run(&layout),
        Command::FormatPatch(options) => format_patch::run(&layout, &options),
    }
}
