//! `patches/<patch>.md`: what a pull request says beyond its commit, with markers that `pr` fills.

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};

use super::audit::CallSite;
use crate::bench_report;
use crate::fsutil::{names, read_if_exists};
use crate::project::{self, Layout};
use crate::resolutions::Resolutions;
use crate::series::Patch;

/// One piece of the notes: Markdown text, or a marker line that `pr` fills from `Facts`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Text(String),
    CallSites,
    RealModel,
    Bench,
}

const MARKERS: [(Part, &str); 3] = [
    (Part::CallSites, "<!-- call-sites -->"),
    (Part::RealModel, "<!-- real-model -->"),
    (Part::Bench, "<!-- bench -->"),
];

/// The notes before their first heading (above the Summary), after it, and in the Test plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Notes {
    pub preamble: Vec<Part>,
    pub sections: Vec<Part>,
    pub test_plan: Vec<Part>,
}

/// The name of the notes of the patch named `patch_file`: `.md` for `.patch`.
pub fn file_name(patch_file: &str) -> String {
    Path::new(patch_file)
        .with_extension("md")
        .to_string_lossy()
        .into_owned()
}

/// The notes of `patch`, from its file name with `.md` for `.patch`; empty without that file.
pub fn load(dir: &Path, patch: &Patch) -> Result<Notes> {
    let path = dir.join(file_name(&patch.file_name));
    // No file reads as an empty one: no notes.
    let text = read_if_exists(&path)?.unwrap_or_default();
    parse(&text).with_context(|| format!("in {}", path.display()))
}

/// The notes of `patch`, whose own are `own`, on a base that has the upstream pull requests
/// `found` (`[base]`, in the order `pr` found them): the first of their notes for it. Else its
/// own notes, less their lead example where one of `found` rewrites the code (not `adds-only`),
/// since that example shows what `main` does; a sentence says why.
pub fn on_base(own: &Notes, found: &[Resolutions], patch: &Patch) -> Notes {
    let written = found.iter().flat_map(|r| &r.notes);
    if let Some((_, notes)) = written
        .into_iter()
        .find(|(name, _)| *name == patch.file_name)
    {
        return notes.clone();
    }
    let mut notes = own.clone();
    let rewriting = found.iter().find(|r| !r.rewrite.adds_only);
    if let Some(rewrite) = rewriting.filter(|_| !notes.preamble.is_empty()) {
        let shown = crate::resolutions::shown(&rewrite.name);
        notes.preamble = vec![Part::Text(format!(
            "(The example that shows this change on `main` is left out: this base has {shown}, \
             and no example was written for it.)"
        ))];
    }
    notes
}

pub fn parse(text: &str) -> Result<Notes> {
    let (mut parts, mut at): ([Vec<Part>; 3], usize) = Default::default();
    for line in text.lines() {
        if at == 0 && line.starts_with("## ") {
            at = 1;
        }
        if line.trim() == "## Test plan" {
            ensure!(at != 2, "`## Test plan` appears twice");
            at = 2;
        } else if line.trim_start().starts_with("<!--") {
            let Some((marker, _)) = MARKERS.into_iter().find(|(_, l)| *l == line.trim()) else {
                let known = MARKERS.map(|(_, line)| line).join(", ");
                bail!("`{}` is not a marker: use one of {known}", line.trim());
            };
            parts[at].push(marker);
        } else if let Some(Part::Text(text)) = parts[at].last_mut() {
            *text += &format!("\n{line}");
        } else {
            parts[at].push(Part::Text(line.to_string()));
        }
    }
    let tidy = |part| match part {
        Part::Text(text) if text.trim().is_empty() => None,
        Part::Text(text) => Some(Part::Text(text.trim_matches('\n').to_string())),
        marker => Some(marker),
    };
    let [preamble, sections, test_plan] =
        parts.map(|parts| parts.into_iter().filter_map(tidy).collect());
    Ok(Notes {
        preamble,
        sections,
        test_plan,
    })
}

/// Fails on a notes file whose patch is gone, as when `format-patch` renamed it after its subject.
pub fn check_paired(dir: &Path, patches: &[Patch]) -> Result<()> {
    for name in names(dir)? {
        let Some(stem) = name.strip_suffix(".md") else {
            continue;
        };
        ensure!(
            patches.iter().any(|p| p.file_name.strip_suffix(".patch") == Some(stem)),
            "patches/{name} belongs to no patch: rename it after its patch ({stem}.patch is not in \
             patches/)"
        );
    }
    Ok(())
}

pub use shared::repro::Table as RealModel;

/// What `pr` computed for the markers of the notes; `None` where it could not.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub call_sites: Option<Vec<CallSite>>,
    pub real_model: Option<RealModel>,
    /// `docs/report/bench-report.json`, written by `cargo xtask bench-report`, less the steps of
    /// patches changed since.
    pub bench: Option<bench_report::data::Report>,
    /// The upstream pull requests of `[base]` that the base has and that rewrite the code (not
    /// `adds-only`), as `#3496`. Both tables measure the published crates, whose sampler they
    /// rewrite, so a body on such a base leaves them out.
    pub rewrites: Vec<String>,
    /// The upstream pull requests of `[base]` that the base has and that only add code
    /// (`adds-only`), as `#3731`: the tables hold there, and say where they were measured.
    pub adds_only: Vec<String>,
}

/// `cargo repro --format json`'s table, run only where a note asks for it; `None` (with the
/// reason on stderr) if it could not run.
pub(super) fn real_model(layout: &Layout, notes: &[Notes]) -> Option<RealModel> {
    let mut parts = notes
        .iter()
        .flat_map(|n| [&n.preamble, &n.sections, &n.test_plan]);
    if !parts.any(|parts| parts.contains(&Part::RealModel)) {
        return None;
    }
    // The build first, its progress shown as cargo shows it: from cold it takes minutes. By
    // target name, as the `repro` alias builds it, so that it reuses the build of `cargo test`.
    eprintln!("real-model rows: building `cargo repro`, then running `cargo repro --format json`");
    let started = std::time::Instant::now();
    let mut build = project::cargo();
    build
        .current_dir(&layout.root)
        .args(["build", "--locked", "--bin", "repro"]);
    if let Err(err) = build.status() {
        eprintln!("cannot run cargo build --bin repro: {err}");
    }
    let (mut repro, args) = (project::cargo(), ["repro", "--format", "json"]);
    let output = project::stdout_of("cargo repro", repro.current_dir(&layout.root).args(args));
    eprintln!(
        "real-model rows: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let parse = |json: String| parse_real_model(&json).context("cargo repro --format json");
    let table = output.and_then(parse);
    table.map_err(|err| eprintln!("{err:#}")).ok()
}

pub fn parse_real_model(json: &str) -> Result<RealModel> {
    serde_json::from_str(json).context("not the JSON of `cargo repro --format json`")
}

/// The committed benchmark report without the steps of patches changed since it was written, or
/// `None` (with the reason on stderr) if missing or unreadable.
pub(super) fn bench(layout: &Layout) -> Option<bench_report::data::Report> {
    let report = bench_report::committed(layout).map_err(|err| eprintln!("{err:#}"));
    let report = report.ok().flatten()?;
    for number in &report.stale {
        eprintln!(
            "{number}: the benchmark report measured other contents of this patch, so its body \
             has no numbers: run {}",
            bench_report::FULL_RUN
        );
    }
    Some(report)
}
