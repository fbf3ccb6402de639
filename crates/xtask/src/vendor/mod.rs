//! `cargo xtask vendor`: writes `crates/vendor` from the published crates and `patches/`; pins.

pub mod rebase;

pub use rebase::Moved;

use std::path::PathBuf;

use anyhow::{ensure, Context, Result};
use fs_err as fs;
use tempfile::TempDir;
use toml_edit::{DocumentMut, Item};

use crate::expected;
use crate::fsutil::{read_if_exists, swap_in, temp_in, write_whole};
use crate::pin::{self, Line, Pin};
use crate::project::{Layout, FUZZ_MANIFEST, GENERATED_ROOT, GITATTRIBUTES_LINE};
use crate::published::{self, Published};
use crate::series::Series;
use crate::trees::write_tree;

#[derive(Debug, Default, clap::Args)]
pub struct Options {
    /// Move every pinned crate to this published version.
    #[arg(long, value_name = "X")]
    pub version: Option<String>,
}

pub fn run(layout: &Layout, options: &Options) -> Result<()> {
    let lines = pin::read_lines(&layout.pin())?;
    let mut published = Vec::new();
    for line in &lines {
        let (name, version) = line.name_and_version();
        let wanted = options.version.as_deref().unwrap_or(version);
        published.push(match line {
            Line::Pinned(pin) if pin.version == wanted => published::load_or_fetch(layout, pin)?,
            _ => published::read_archive(&published::fetch(layout, name, wanted)?, name, wanted)?,
        });
    }
    // Another release: the series moves onto it first. Only where every crate is pinned already.
    let pinned = lines.iter().all(|line| matches!(line, Line::Pinned(_)));
    let mut versions = lines.iter().zip(&published);
    let moving = pinned && versions.any(|(old, new)| old.name_and_version().1 != new.pin.version);
    let old = if moving {
        Some(published::load_all(layout)?)
    } else {
        None
    };
    eprint!("{}", update(layout, &lines, old.as_deref(), &published)?);
    Ok(())
}

/// What `vendor` wrote: each patch the release moved, the generated folders with their trees,
/// and the pin's label where it pinned another release. `run` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vendored {
    /// The published crates, by label, and each patch applied to them, in order.
    pub release: String,
    pub patches: Vec<String>,
    /// Each patch whose bytes a move to another release changed, by file name.
    pub moved: Vec<(String, Moved)>,
    pub folders: Vec<(String, git2::Oid)>,
    pub pinned: Option<String>,
}

impl std::fmt::Display for Vendored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for file in &self.patches {
            writeln!(f, "[PATCH] {} <- {file}", self.release)?;
        }
        for (file, moved) in &self.moved {
            let what = match moved {
                Moved::Rewritten => "merged three ways onto the release, written again",
                Moved::Retired => "the release holds it: retired in patches/stack.toml",
            };
            writeln!(f, "[vendor] {file}: {what}")?;
        }
        for (dir, tree) in &self.folders {
            writeln!(f, "wrote {dir} (tree {tree})")?;
        }
        if let Some(label) = &self.pinned {
            writeln!(
                f,
                "pinned {label} and set Cargo.toml's candle versions and [patch.crates-io] to \
                 match; run `cargo update -p candle-transformers` to update Cargo.lock, then \
                 `cargo test`"
            )?;
        }
        Ok(())
    }
}

/// Moves the series from the crates `old` onto `published` (`None`: it stays), writes every
/// generated folder, and pins `published` where `lines` differ. Each file is made aside first and
/// all are written at the end, so that a failure leaves `patches/`, the folders and the pin as
/// they were. Returns what it wrote.
pub fn update(
    layout: &Layout,
    lines: &[Line],
    old: Option<&[Published]>,
    published: &[Published],
) -> Result<Vendored> {
    let (mut patches_dir, mut pairs, mut aside) = (layout.patches(), Vec::new(), Vec::new());
    let rebase::Rebased {
        moved,
        aside: moved_aside,
    } = match old {
        None => rebase::Rebased::default(),
        Some(old) => rebase::rebase(layout, old, published)?,
    };
    if let Some((temp, new)) = moved_aside {
        patches_dir = new.clone();
        pairs.push((new, layout.patches()));
        aside.push(temp);
    }
    let series = Series::load(&patches_dir)?;
    let (folders, temp) = generate(layout, published, &series, &mut pairs)?;
    aside.push(temp);
    let pins: Vec<Pin> = published.iter().map(|p| p.pin.clone()).collect();
    let repinned = if lines != pins.iter().cloned().map(Line::Pinned).collect::<Vec<_>>() {
        repinned(layout, lines, &pins)?
    } else {
        Vec::new()
    };
    let marked = marked_generated(layout)?;
    swap_in(&pairs)?;
    for (path, text) in marked.iter().chain(&repinned) {
        write_whole(path, text)?;
    }
    Ok(Vendored {
        release: pin::label(&pins),
        patches: series.patches.iter().map(|p| p.file_name.clone()).collect(),
        moved,
        folders: folders.into_iter().map(|f| (f.dir, f.tree)).collect(),
        pinned: (!repinned.is_empty()).then(|| pin::label(&pins)),
    })
}

/// The candle crates of one release, whose version `[workspace.dependencies]` sets to the pin's.
const CANDLE_CRATES: [&str; 3] = ["candle-core", "candle-nn", "candle-transformers"];

/// The pin of `new`, and `Cargo.toml` and the fuzzer's manifest with their candle versions and
/// `[patch.crates-io]` to match, each with its path: computed, not written.
pub fn repinned(layout: &Layout, old: &[Line], new: &[Pin]) -> Result<Vec<(PathBuf, String)>> {
    let manifest = layout.root.join("Cargo.toml");
    let text = fs::read_to_string(&manifest)?;
    let (old_version, new_version) = (old[0].name_and_version().1, new[0].version.as_str());
    let (mut updated, count) = set_versions(&text, old_version, new_version)?;
    ensure!(
        count > 0 || old_version == new_version,
        "Cargo.toml names no candle crate at version {old_version}: set the versions by hand"
    );
    let names: Vec<&str> = new.iter().map(|p| p.name.as_str()).collect();
    updated = patch_entries(&updated, &names, &format!("{GENERATED_ROOT}/"))?;
    let mut files = vec![(layout.pin(), pin::render(new)), (manifest, updated)];
    let fuzz = layout.root.join(FUZZ_MANIFEST);
    if let Some(text) = read_if_exists(&fuzz)? {
        files.push((fuzz, patch_entries(&text, &names, "../vendor/")?));
    }
    Ok(files)
}

/// `manifest` with a `[patch.crates-io]` entry per name it lacks, and the generated root excluded.
pub fn patch_entries(manifest: &str, names: &[&str], prefix: &str) -> Result<String> {
    let mut document: DocumentMut = manifest.parse()?;
    let mut implicit = toml_edit::Table::new();
    implicit.set_implicit(true);
    let patch = document
        .entry("patch")
        .or_insert(Item::Table(implicit))
        .as_table_mut()
        .context("`patch` is not a table")?
        .entry("crates-io")
        .or_insert_with(toml_edit::table)
        .as_table_like_mut()
        .context("`patch.crates-io` is not a table")?;
    for name in names {
        let path = toml_edit::InlineTable::from_iter([("path", format!("{prefix}{name}"))]);
        patch.entry(name).or_insert(toml_edit::value(path));
    }
    let exclude = document
        .get_mut("workspace")
        .and_then(|w| w.get_mut("exclude"))
        .and_then(Item::as_array_mut)
        .filter(|e| !e.iter().any(|e| e.as_str() == Some(GENERATED_ROOT)));
    if let Some(exclude) = exclude {
        exclude.push(GENERATED_ROOT);
    }
    Ok(document.to_string())
}

/// `text` with its candle crates' `[workspace.dependencies]` moved from `old` to `new`; how many.
pub fn set_versions(text: &str, old: &str, new: &str) -> Result<(String, usize)> {
    let mut document: DocumentMut = text.parse()?;
    let mut count = 0;
    let dependencies = document
        .get_mut("workspace")
        .and_then(|w| w.get_mut("dependencies"))
        .and_then(Item::as_table_like_mut);
    for (key, item) in dependencies.into_iter().flat_map(|d| d.iter_mut()) {
        let package = item.get("package").and_then(Item::as_str);
        if !CANDLE_CRATES.contains(&package.unwrap_or(key.get())) {
            continue;
        }
        let version = match item.as_table_like_mut() {
            Some(table) => table.get_mut("version"),
            None => Some(item),
        };
        if let Some(Item::Value(value)) = version.filter(|v| v.as_str() == Some(old)) {
            let decor = value.decor().clone();
            *value = new.into();
            *value.decor_mut() = decor;
            count += 1;
        }
    }
    Ok((document.to_string(), count))
}

/// Every generated folder of `series` on `published`, written into a folder aside (returned, it
/// goes when dropped), each added to `pairs` with the folder it takes the place of.
fn generate(
    layout: &Layout,
    published: &[Published],
    series: &Series,
    pairs: &mut Vec<(PathBuf, PathBuf)>,
) -> Result<(Vec<expected::Folder>, TempDir)> {
    let (scratch, generated) = expected::generated(published, series)?;
    // A folder in the generated root is on the same file system, so a rename moves it.
    let temp = temp_in(&layout.root.join(GENERATED_ROOT), "vendor")?;
    for (i, folder) in generated.iter().enumerate() {
        let new = temp.path().join(i.to_string());
        write_tree(&scratch, folder.tree, &new)?;
        pairs.push((new, layout.root.join(&folder.dir)));
    }
    Ok((generated, temp))
}

/// `.gitattributes` with the line that marks the generated root, and its path; `None` where it
/// has the line already.
fn marked_generated(layout: &Layout) -> Result<Option<(PathBuf, String)>> {
    let path = layout.root.join(".gitattributes");
    let mut text = read_if_exists(&path)?.unwrap_or_default();
    if text.lines().any(|line| line.trim() == GITATTRIBUTES_LINE) {
        return Ok(None);
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(Some((path, format!("{text}{GITATTRIBUTES_LINE}\n"))))
}

#[cfg(test)]
#[path = "../../tests/private/vendor.rs"]
mod tests;
