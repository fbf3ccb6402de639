//! `cargo xtask check`, offline: the generated folders are the published crates + `patches/`, and
//! cargo builds them.

pub mod builds;
pub mod patch_use;

use std::path::Path;

use anyhow::{bail, ensure, Result};
use fs_err as fs;
use git2::Oid;

use crate::apply;
use crate::expected::{self, Folder};
use crate::fsutil::read_if_exists;

use crate::pin;
use crate::project::{self, Layout, GENERATED_ROOT, GITATTRIBUTES_LINE, REPORT_DIR};
use crate::published::{self, Published};
use crate::series::{self, Series};
use crate::trees;

/// What `check` proved, in order, and what it warns of: `run` prints it, as far as it got.
#[derive(Debug, Default)]
pub struct Checked {
    pub ok: Vec<Proved>,
    pub warning: Option<String>,
}

/// One thing `check` proved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Proved {
    IndexLines,
    /// A generated folder is what it should be: its path, what it is, its tree.
    Current {
        dir: String,
        what: String,
        tree: Oid,
    },
    /// Cargo builds the pinned crate `name` from its generated folder `dir`.
    BuildsFrom {
        name: String,
        dir: String,
    },
    /// `cargo repro`, `cargo xtask` and `cargo test` resolve each crate's features alike.
    OneFeatureSet,
    /// Each crate has one test binary, and a harness only where it has unit tests.
    OneTestBinary,
    /// The committed benchmark report measured `patches/` as it is.
    ReportCurrent,
}

impl std::fmt::Display for Proved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Proved::IndexLines => write!(
                f,
                "every patch's index lines name the blobs the series gives"
            ),
            Proved::Current { dir, what, tree } => write!(f, "{dir} is {what} (tree {tree})"),
            Proved::BuildsFrom { name, dir } => write!(f, "cargo builds {name} from {dir}"),
            Proved::OneFeatureSet => write!(
                f,
                "`cargo repro`, `cargo xtask` and `cargo test` build each crate with one set of \
                 features"
            ),
            Proved::OneTestBinary => write!(
                f,
                "one test binary per crate, and a harness only where there are unit tests"
            ),
            Proved::ReportCurrent => write!(f, "{REPORT_DIR} measured patches/ as it is"),
        }
    }
}

impl std::fmt::Display for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for proved in &self.ok {
            writeln!(f, "ok: {proved}")?;
        }
        match &self.warning {
            Some(warning) => writeln!(f, "warning: {warning}"),
            None => Ok(()),
        }
    }
}

pub fn run(layout: &Layout) -> Result<()> {
    let mut checked = Checked::default();
    let result = check(layout, &mut checked);
    eprint!("{checked}");
    result
}

/// Every check in turn, each one's finding added to `checked`; the first failure ends it.
fn check(layout: &Layout, checked: &mut Checked) -> Result<()> {
    // What `pr` reads beside the patches names only patches that exist (`Series::load`).
    let series = Series::load(&layout.patches())?;
    let patches = &series.patches;
    let pins = pin::read(&layout.pin())?;
    let published = pins.iter().map(published::load_pinned);
    let published = published.collect::<Result<Vec<_>>>()?;
    checked.ok.push(check_index_lines(&published, patches)?);
    checked
        .ok
        .extend(generated_current(layout, &series, &published)?);
    let graph = patch_use::resolve(&layout.root)?;
    for pin in &pins {
        let (name, dir) = (&pin.name, project::vendored_dir(&pin.name));
        patch_use::check(&graph, name, &pin.version, &layout.root.join(&dir))?;
        let (name, dir) = (name.clone(), dir.clone());
        checked.ok.push(Proved::BuildsFrom { name, dir });
    }
    checked.ok.extend(builds::check(&layout.root, &graph)?);
    // A patch edit need not wait on a bench run: a stale report is named, not refused.
    checked.warning = crate::report::staleness(layout, &series)?;
    if checked.warning.is_none() {
        checked.ok.push(Proved::ReportCurrent);
    }
    Ok(())
}

/// Fails unless every patch's `index` lines name the blobs that applying the series to the
/// published crates gives, which a three-way apply (`git am -3`, `pr`, `vendor`) merges from.
/// Returns what it proved.
pub fn check_index_lines(published: &[Published], patches: &[series::Patch]) -> Result<Proved> {
    let repo = &trees::scratch()?;
    let trees = apply::in_turn(repo, expected::published_tree(repo, published)?, patches)?;
    for (patch, pair) in patches.iter().zip(trees.windows(2)) {
        if let Some(differs) = series::index_line_differs(repo, pair[0], pair[1], patch)? {
            bail!("{differs}");
        }
    }
    Ok(Proved::IndexLines)
}

/// Fails, naming what differs, unless the generated root and its `.gitattributes` line are
/// current for `series` on `published`. Returns each folder that is.
pub fn generated_current(
    layout: &Layout,
    series: &Series,
    published: &[Published],
) -> Result<Vec<Proved>> {
    let (scratch, generated) = expected::generated(published, series)?;
    let (mut problems, mut current) = (Vec::new(), Vec::new());
    let entries = fs::read_dir(layout.root.join(GENERATED_ROOT));
    for entry in entries.into_iter().flatten() {
        let path = format!("{GENERATED_ROOT}/{}", entry?.file_name().to_string_lossy());
        if !generated.iter().any(|folder| folder.dir == path) {
            problems.push(format!(
                "{path} is under {GENERATED_ROOT}, which holds only what `cargo xtask vendor` \
                 writes: move it out or delete it"
            ));
        }
    }
    let attributes = read_if_exists(&layout.root.join(".gitattributes"))?.unwrap_or_default();
    let marks = |line: &&str| line.contains("linguist-generated");
    let marked: Vec<&str> = attributes.lines().map(str::trim).filter(marks).collect();
    if marked != [GITATTRIBUTES_LINE] {
        problems.push(format!(
            ".gitattributes marks {marked:?} generated, not exactly `{GITATTRIBUTES_LINE}`"
        ));
    }
    for Folder { dir, what, tree } in &generated {
        problems.extend(not_in_root(dir));
        if !layout.root.join(dir).is_dir() {
            problems.push(format!("{dir} is missing"));
            continue;
        }
        let actual = trees::tree_of_dir(&scratch, &layout.root.join(dir))?;
        if actual == *tree {
            let (dir, what) = (dir.clone(), what.clone());
            current.push(Proved::Current {
                dir,
                what,
                tree: actual,
            });
            continue;
        }
        let mut changes = trees::differences(&scratch, *tree, actual)?;
        let more = changes.split_off(changes.len().min(20)).len();
        if more > 0 {
            changes.push(format!("and {more} more"));
        }
        let changes = changes.join("\n    ");
        problems.push(format!("{dir} differs from {what}:\n    {changes}"));
    }
    ensure!(
        problems.is_empty(),
        "{}\nrun `cargo xtask vendor` to regenerate them; a change made there by hand \
             belongs in a patch (README: \"After review comments\")",
        problems.join("\n")
    );
    Ok(current)
}

/// The problem with the generated folder `dir` unless it lies directly in the generated root,
/// where `vendor` renames it into place from a temporary folder on the same file system.
fn not_in_root(dir: &str) -> Option<String> {
    let outside = Path::new(dir).parent() != Some(Path::new(GENERATED_ROOT));
    outside.then(|| format!("{dir} is generated but not under {GENERATED_ROOT}"))
}

#[cfg(test)]
#[path = "../../tests/private/check.rs"]
mod tests;
