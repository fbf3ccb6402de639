//! The upstream pin, `patches/upstream.toml`: a line per published crate that `patches/` applies
//! to, such as
//!
//! ```toml
//! candle-transformers = { version = "0.11.1", sha256 = "…", commit = "…", path_in_vcs = "candle-transformers" }
//! ```
//!
//! The first line's crate is the one the labels name. A line with a version alone is a crate to
//! add, whose sha256, commit and folder `cargo xtask vendor` fills in from the `.crate`.

use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use serde::de::{Deserialize, IntoDeserializer};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    pub name: String,
    pub version: String,
    /// The sha256 of the `.crate` file.
    pub sha256: String,
    /// The upstream commit and folder, from its `.cargo_vcs_info.json`.
    pub commit: String,
    pub path_in_vcs: String,
}

/// One line of the pin file: a crate pinned, or one just added that `vendor` has yet to pin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Pinned(Pin),
    New { name: String, version: String },
}

impl Line {
    /// The crate's name and the version the line asks for.
    pub fn name_and_version(&self) -> (&str, &str) {
        match self {
            Line::Pinned(pin) => (&pin.name, &pin.version),
            Line::New { name, version } => (name, version),
        }
    }
}

/// A line as written: a crate just added has its version alone.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    version: String,
    sha256: Option<String>,
    commit: Option<String>,
    path_in_vcs: Option<String>,
}

pub fn read_lines(path: &Path) -> Result<Vec<Line>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the upstream pin {}", path.display()))?;
    parse(&text).with_context(|| format!("in {}", path.display()))
}

/// Every crate of the pin file at `path`, all pinned, or an error that says to run `vendor`.
pub fn read(path: &Path) -> Result<Vec<Pin>> {
    read_lines(path)?
        .into_iter()
        .map(|line| match line {
            Line::Pinned(pin) => Ok(pin),
            Line::New { name, version } => bail!(
                "{}: {name} {version} is not pinned yet: run `cargo xtask vendor`",
                path.display()
            ),
        })
        .collect()
}

/// Reads the lines that `render` writes; a line with only a version is a crate to pin.
pub fn parse(text: &str) -> Result<Vec<Line>> {
    let document: toml_edit::DocumentMut = text.parse()?;
    let mut lines = Vec::new();
    for (name, item) in document.iter() {
        let Ok(value) = item.clone().into_value() else {
            bail!("`{name}` must be a table `{{ version = \"…\", … }}`");
        };
        let entry = Entry::deserialize(value.into_deserializer())
            .map_err(|err| anyhow::anyhow!("`{name}`: {}", err.message()))?;
        let (name, version) = (name.to_string(), entry.version);
        lines.push(match (entry.sha256, entry.commit, entry.path_in_vcs) {
            (Some(sha256), Some(commit), Some(path_in_vcs)) => {
                ensure!(
                    sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit()),
                    "`{name}`: `sha256` must be 64 hex digits, got `{sha256}`"
                );
                Line::Pinned(Pin {
                    name,
                    version,
                    sha256,
                    commit,
                    path_in_vcs,
                })
            }
            _ => Line::New { name, version },
        });
    }
    ensure!(!lines.is_empty(), "no crate is pinned");
    Ok(lines)
}

pub fn render(pins: &[Pin]) -> String {
    let mut text = String::from(
        "# The published crates that the patches in this folder apply to, one line each; the first\n\
         # is the one labels name. Written by `cargo xtask vendor`: to vendor another crate, add a\n\
         # line `name = { version = \"X\" }` and run it; commit and path_in_vcs come from the\n\
         # crate's .cargo_vcs_info.json.\n",
    );
    for pin in pins {
        text += &format!(
            "{} = {{ version = \"{}\", sha256 = \"{}\", commit = \"{}\", path_in_vcs = \"{}\" }}\n",
            pin.name, pin.version, pin.sha256, pin.commit, pin.path_in_vcs
        );
    }
    text
}

/// "candle-transformers 0.11.1", or "candle-transformers 0.11.1 and candle-nn 0.11.1".
pub fn label(pins: &[Pin]) -> String {
    let labels: Vec<String> = pins.iter().map(Pin::label).collect();
    match &labels[..] {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

pub fn file(root: &Path) -> PathBuf {
    root.join("patches").join("upstream.toml")
}

impl Pin {
    /// "candle-transformers 0.11.1", for messages.
    pub fn label(&self) -> String {
        format!("{} {}", self.name, self.version)
    }
}
