//! `patches/stack.toml`, read with serde: how the patches go upstream, one pull request each.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::fsutil::read_if_exists;
use crate::series::Patch;

/// A patch this workspace applies to its crates but does not propose upstream.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Carried {
    /// Why it is not proposed, in a sentence.
    pub why: String,
    /// The upstream pull request that does its job, as in `#3496`, where one does.
    pub upstream: Option<String>,
}

/// A number that no patch may take again: its patch left the series. `retire` writes it as its
/// `[retired.NNNN]` entry, each field that it has in this order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Retired {
    /// Where it went, in a sentence.
    pub why: String,
    /// Where candle holds it, when it landed there: the published version, the commit on
    /// candle's main, the pull request, as in `0.11.2`, `9c7435e` and `#3900`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull: Option<String>,
}

/// An upstream pull request that rewrites the code the patches change, such as candle's #3496:
/// where a base has it, some patches go on as the resolutions in `patches/on-<name>/`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rewrite {
    /// What it changes, in a sentence.
    pub why: String,
    /// A base has it when its file `path` holds the text `holds`.
    pub path: String,
    pub holds: String,
    /// It only adds code (`adds-only = true`): `main`'s examples, and the tables measured on the
    /// published crates, hold on a base that has it.
    #[serde(default, rename = "adds-only")]
    pub adds_only: bool,
}

/// `patches/stack.toml`: `[builds-on]`, where `"0004" = "0001"` makes 0004's branch build on
/// 0001's (others branch from the base), `[carried.NNNN]`, the patches kept out of the stack,
/// `[retired.NNNN]`, the numbers of patches that left the series, and `[base."N"]`, the upstream
/// pull requests that rewrite the patches' code, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackFile {
    #[serde(default, rename = "builds-on")]
    pub builds_on: BTreeMap<String, String>,
    #[serde(default)]
    pub carried: BTreeMap<String, Carried>,
    #[serde(default)]
    pub retired: BTreeMap<String, Retired>,
    #[serde(default, rename = "base")]
    pub rewrites: BTreeMap<String, Rewrite>,
}

/// `patches/stack.toml` as written; empty without the file.
pub(crate) fn read(patches_dir: &Path) -> Result<StackFile> {
    let path = patches_dir.join("stack.toml");
    // No file reads as an empty one: no table.
    let text = read_if_exists(&path)?.unwrap_or_default();
    let file: StackFile = toml_edit::de::from_str(&text).map_err(|err| {
        // As `path:line:column: what`, the line and column of where serde stopped.
        let at = err.span().map_or(0, |span| span.start);
        let line = text[..at].matches('\n').count() + 1;
        let column = at - text[..at].rfind('\n').map_or(0, |newline| newline + 1) + 1;
        anyhow::anyhow!("{}:{line}:{column}: {}", path.display(), err.message())
    })?;
    for (patch, parent) in &file.builds_on {
        if parent >= patch {
            bail!(
                "{}: [builds-on] `{patch}` must name an earlier patch's number, as in \"0001\"",
                path.display()
            );
        }
    }
    Ok(file)
}

impl StackFile {
    /// `patches` without the carried ones, and the carried ones, each in series order.
    pub fn split_carried(&self, patches: Vec<Patch>) -> (Vec<Patch>, Vec<Patch>) {
        let carried = |p: &Patch| self.carried.contains_key(p.number());
        let (carried, proposed): (Vec<Patch>, Vec<Patch>) = patches.into_iter().partition(carried);
        (proposed, carried)
    }

    /// `[builds-on]` less every entry that names one of `numbers`, as `retire` leaves it.
    pub fn builds_on_without(&self, numbers: &[&str]) -> BTreeMap<String, String> {
        let named = |n: &String| numbers.contains(&n.as_str());
        let mut builds_on = self.builds_on.clone();
        builds_on.retain(|patch, parent| !named(patch) && !named(parent));
        builds_on
    }

    /// The number a new patch takes: one past every patch's and every retired one's.
    pub fn next_number(&self, patches: &[Patch]) -> String {
        let numbers = patches.iter().map(Patch::number);
        let numbers = numbers.chain(self.retired.keys().map(String::as_str));
        let last = numbers.filter_map(|n| n.parse::<u32>().ok()).max();
        format!("{:04}", last.unwrap_or(0) + 1)
    }

    /// Fails on a number that names no patch of `patches`, and on a proposed patch that builds
    /// on a carried one, whose branch would not exist upstream.
    pub fn check(&self, patches: &[Patch]) -> Result<()> {
        let known = |number: &str| patches.iter().any(|p| p.number() == number);
        let named = self.builds_on.iter().flat_map(|(p, q)| [p, q]);
        let named = named.chain(self.carried.keys());
        if let Some(number) = named.into_iter().find(|n| !known(n)) {
            bail!("patches/stack.toml names {number}, which is no patch in patches/");
        }
        let retired = patches
            .iter()
            .find(|p| self.retired.contains_key(p.number()));
        if let Some(patch) = retired {
            let number = patch.number();
            bail!(
                "{} takes the number {number}, which patches/stack.toml retired \
                 ([retired.{number}]): give it the next free number, {}",
                patch.file_name,
                self.next_number(patches)
            );
        }
        for (patch, parent) in &self.builds_on {
            if self.carried.contains_key(parent) && !self.carried.contains_key(patch) {
                bail!(
                    "patches/stack.toml: {patch} builds on {parent}, which is carried, not \
                     proposed: a pull request cannot build on it"
                );
            }
        }
        Ok(())
    }
}

/// `stack.toml`'s `text` with each of `retiring` under `[retired]`, and gone from `[builds-on]` and
/// `[carried]`: a patch that built on one now builds on the base. Comments and order stay.
pub(crate) fn retire(text: &str, retiring: &[(&Patch, Retired)]) -> Result<String> {
    use toml_edit::{DocumentMut, Item, Table};
    let mut document: DocumentMut = text.parse().context("patches/stack.toml is not TOML")?;
    for (patch, retired) in retiring {
        let number = patch.number();
        // Its entries go: in `[builds-on]` where it is the key or the value, in `[carried]` where it
        // is the key (whose value is a table).
        for name in ["builds-on", "carried"] {
            let table = document.get_mut(name).and_then(Item::as_table_like_mut);
            let Some(table) = table else { continue };
            let named = table
                .iter()
                .filter(|(key, value)| *key == number || value.as_str() == Some(number));
            let named: Vec<String> = named.map(|(key, _)| key.to_string()).collect();
            for key in named {
                table.remove(&key);
            }
        }
        let table = document.entry("retired").or_insert_with(|| {
            let mut table = Table::new();
            table.set_implicit(true);
            Item::Table(table)
        });
        let table = table.as_table_mut().context("[retired] must be a table")?;
        let entry = toml_edit::ser::to_document(retired)?;
        table.insert(number, Item::Table(entry.as_table().clone()));
    }
    Ok(document.to_string())
}
