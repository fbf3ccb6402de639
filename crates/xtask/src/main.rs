use std::process::ExitCode;

use anyhow::{bail, Result};
use xtask::flags::Flags;
use xtask::pin::Pin;
use xtask::project::Layout;
use xtask::{check, published, vendor};

const HELP: &str = "\
cargo xtask <command>

  fetch                 download the pinned crate into cargo's cache and check its sha256
  vendor [--version X]  regenerate crates/candle-transformers and crates/upstream/src/generation
                        from the published crate and patches/ (X: pin another published version)
  check                 fail unless those folders are exactly published crate + patches/ and
                        cargo builds the patched crate (offline)
";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<()> {
    let layout = Layout::workspace();
    let Some((command, rest)) = args.split_first() else {
        eprint!("{HELP}");
        return Ok(());
    };
    let mut flags = Flags::new(rest.to_vec());
    match command.as_str() {
        "fetch" => {
            flags.finish()?;
            let pin = Pin::read(&layout.pin())?;
            published::load_or_fetch(&layout, &pin)?;
            eprintln!(
                "ok: {} is in cargo's cache, sha256 {}",
                pin.label(),
                pin.sha256
            );
            Ok(())
        }
        "vendor" => {
            let version = flags.value("--version")?;
            flags.finish()?;
            vendor::run(&layout, version.as_deref())
        }
        "check" => {
            flags.finish()?;
            check::run(&layout)
        }
        "help" | "--help" | "-h" => {
            eprint!("{HELP}");
            Ok(())
        }
        other => bail!("unknown command `{other}`\n\n{HELP}"),
    }
}
