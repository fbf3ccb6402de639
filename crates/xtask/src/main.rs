use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use shared::flags::Flags;
use xtask::pin;
use xtask::project::Layout;
use xtask::{bench_report, check, format_patch, metal, pr, published, vendor};

const HELP: &str = "\
cargo xtask <command>

  fetch                 download the pinned crates into cargo's cache and check their sha256
  vendor [--version X]  regenerate the generated folders (one per pinned crate, the upstream
                        module, the published tests, the benches' points) from the published
                        crates and patches/, pinning any crate newly listed in patches/upstream.toml
                        (X: move every pinned crate to another published version)
  check                 fail unless those folders are exactly published crates (+ patches/) and
                        cargo builds each pinned crate from its folder (offline)
  bench-report [--callgrind]
                        the whole series, each patch against the branch it builds on, and the
                        decode loop, from `cargo bench`'s results and paired rounds, with
                        verdicts and floors (--callgrind: instructions per call too); writes
                        target/bench-report.md, .json and target/bench-scaling.svg
  pr [--candle <clone>] [--base main] [--prefix P] [--force-branch] [--patches 0001,...]
     [--author \"Name <email>\"] [--verify]
                        make the upstream pull requests as a stack, one branch per patch in the
                        clone, committed as the clone's git identity or --author, and write
                        target/pr/<branch>/ (title, body, patch) for each; --verify runs
                        candle's CI commands on every branch
  metal-check           clippy for aarch64-apple-darwin with `metal`, over the crates that have
                        the feature (type-checked, not linked or run)
  format-patch --candle <clone> --branch NAME [--base main]
                        write the branch's commits back into patches/ (after review comments)
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
            for pin in pin::read(&layout.pin())? {
                published::load_or_fetch(&layout, &pin)?;
                eprintln!(
                    "ok: {} is in cargo's cache, sha256 {}",
                    pin.label(),
                    pin.sha256
                );
            }
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
        "bench-report" => {
            let callgrind = flags.switch("--callgrind");
            flags.finish()?;
            bench_report::run(&layout, callgrind)
        }
        "pr" => {
            if flags.value("--branch")?.is_some() {
                bail!(
                    "--branch is gone: every patch gets its own branch, named from its subject; \
                     put a prefix before those names with --prefix"
                );
            }
            let options = pr::Options {
                candle: flags.value("--candle")?.map(Into::into),
                base: flags.value("--base")?.unwrap_or_else(|| "main".to_string()),
                prefix: flags.value("--prefix")?.unwrap_or_default(),
                force_branch: flags.switch("--force-branch"),
                author: flags.value("--author")?,
                verify: flags.switch("--verify"),
                patches: flags
                    .value("--patches")?
                    .map(|list| list.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
            };
            flags.finish()?;
            pr::run(&layout, &options)
        }
        "metal-check" => {
            flags.finish()?;
            metal::run(&layout)
        }
        "format-patch" => {
            let candle = flags
                .value("--candle")?
                .context("--candle <clone> is required")?;
            let branch = flags
                .value("--branch")?
                .context("--branch NAME is required")?;
            let base = flags.value("--base")?.unwrap_or_else(|| "main".to_string());
            flags.finish()?;
            format_patch::run(&layout, Path::new(&candle), &branch, &base)
        }
        "help" | "--help" | "-h" => {
            eprint!("{HELP}");
            Ok(())
        }
        other => bail!("unknown command `{other}`\n\n{HELP}"),
    }
}
