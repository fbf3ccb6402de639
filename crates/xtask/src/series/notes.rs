//! `patches/<patch>.md`: what a pull request says beyond its commit, with markers that `pr` fills.

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};

use crate::fsutil::{names, read_if_exists};
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

impl Notes {
    /// Every part, in the body's order.
    pub fn parts(&self) -> impl Iterator<Item = &Part> {
        [&self.preamble, &self.sections, &self.test_plan]
            .into_iter()
            .flatten()
    }
}

/// The name of the notes of the patch named `patch_file`: `.md` for `.patch`.
pub fn file_name(patch_file: &str) -> String {
    Path::new(patch_file)
        .with_extension("md")
        .to_string_lossy()
        .into_owned()
}

/// The notes of `patch`, from its file name with `.md` for `.patch`; empty without that file.
pub(crate) fn load(dir: &Path, patch: &Patch) -> Result<Notes> {
    let path = dir.join(file_name(&patch.file_name));
    // No file reads as an empty one: no notes.
    let text = read_if_exists(&path)?.unwrap_or_default();
    parse(&text).with_context(|| format!("in {}", path.display()))
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
pub(crate) fn check_paired(dir: &Path, patches: &[Patch]) -> Result<()> {
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
