//! What `pr` fills the markers of the notes with, and the notes it takes on a base.

use anyhow::{Context, Result};
use shared::repro::Table;

use super::audit::CallSite;
use crate::cmd;
use crate::project::Layout;
use crate::report;
use crate::series::notes::{Notes, Part};
use crate::series::resolutions::Resolutions;
use crate::series::{Patch, Series};

/// The notes of `patch`, whose own are `own`, on a base that has the upstream pull requests
/// `found` (`[base]`, in the order `pr` found them): the first of their notes for it. Else its
/// own notes, less their lead example where one of `found` rewrites the code (not `adds-only`),
/// since that example shows what `main` does; a sentence says why.
pub fn on_base(own: &Notes, found: &[Resolutions], patch: &Patch) -> Notes {
    if let Some(notes) = found.iter().find_map(|r| r.notes.get(&patch.file_name)) {
        return notes.clone();
    }
    let mut notes = own.clone();
    let rewriting = found.iter().find(|r| !r.rewrite.adds_only);
    if let Some(rewrite) = rewriting.filter(|_| !notes.preamble.is_empty()) {
        let shown = crate::series::resolutions::shown(&rewrite.name);
        let said = crate::template::sentence("body", "no_example", &[shown.into()]);
        notes.preamble = vec![Part::Text(said)];
    }
    notes
}

/// What `pr` computed for the markers of the notes; `None` where it could not.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub call_sites: Option<Vec<CallSite>>,
    pub real_model: Option<Table>,
    /// `docs/report/bench-report.json`, written by `cargo xtask bench-report`, less the steps of
    /// patches changed since.
    pub bench: Option<report::Report>,
    /// The upstream pull requests of `[base]` that the base has and that rewrite the code (not
    /// `adds-only`), as `#3496`. Both tables measure the published crates, whose sampler they
    /// rewrite, so a body on such a base leaves them out.
    pub rewrites: Vec<String>,
    /// The upstream pull requests of `[base]` that the base has and that only add code
    /// (`adds-only`), as `#3731`: the tables hold there, and say where they were measured.
    pub adds_only: Vec<String>,
}

/// `cargo repro --format json`'s table, run only where a note asks for it (`None` where none
/// does); an error where it could not run, which `pr` says and goes on without.
pub(super) fn real_model(layout: &Layout, notes: &[&Notes]) -> Result<Option<Table>> {
    if !notes
        .iter()
        .flat_map(|n| n.parts())
        .any(|p| *p == Part::RealModel)
    {
        return Ok(None);
    }
    // The build first, its progress shown as cargo shows it: from cold it takes minutes. By
    // target name, as the `repro` alias builds it, so that it reuses the build of `cargo test`.
    eprintln!("real-model rows: building `cargo repro`, then running `cargo repro --format json`");
    let started = std::time::Instant::now();
    let mut build = cmd::cargo();
    build
        .current_dir(&layout.root)
        .args(["build", "--locked", "--bin", "repro"]);
    cmd::run_checked(&mut build, "cargo build --bin repro failed")?;
    let (mut repro, args) = (cmd::cargo(), ["repro", "--format", "json"]);
    let output = cmd::stdout_of("cargo repro", repro.current_dir(&layout.root).args(args))?;
    eprintln!(
        "real-model rows: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    parse_real_model(&output)
        .context("cargo repro --format json")
        .map(Some)
}

pub fn parse_real_model(json: &str) -> Result<Table> {
    serde_json::from_str(json).context("not the JSON of `cargo repro --format json`")
}

/// The committed benchmark report without the steps of patches changed since it was written, or
/// `None` where it is missing or unreadable; and what to say of it: why it could not be read, or
/// each patch whose body has no numbers since it changed.
pub(super) fn bench(layout: &Layout, series: &Series) -> (Option<report::Report>, Vec<String>) {
    let report = match report::committed(layout, series) {
        Ok(report) => report,
        Err(err) => return (None, vec![format!("{err:#}")]),
    };
    let stale = report.iter().flat_map(|report| &report.stale);
    let said = stale.map(|number| {
        format!(
            "{number}: the benchmark report measured other contents of this patch, so its body \
             has no numbers: run {}",
            report::FULL_RUN
        )
    });
    let said = said.collect();
    (report, said)
}
