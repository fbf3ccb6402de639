//! `cargo xtask check`, offline: the generated folders are the published crates + `patches/`, and
//! cargo builds them.

pub mod builds;
pub mod patch_use;

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use fs_err as fs;

use crate::apply;
use crate::expected::{self, Folder};
use crate::fsutil::read_if_exists;

use crate::pin;
use crate::project::{self, Layout, FUZZ_MANIFEST, GENERATED_ROOT, GITATTRIBUTES_LINE};
use crate::published::{self, Published};
use crate::series::{self, Series};

pub fn run(layout: &Layout) -> Result<()> {
    // What `pr` reads beside the patches names only patches that exist (`Series::load`).
    let series = Series::load(&layout.patches())?;
    let patches = &series.patches;
    retired_in_history(layout, &series.stack, patches)?;
    let pins = pin::read(&layout.pin())?;
    let published = pins.iter().map(published::load_pinned);
    let published = published.collect::<Result<Vec<_>>>()?;
    check_index_lines(&published, patches)?;
    generated_current(layout, &series, &published)?;
    let graph = patch_use::resolve(&layout.root)?;
    for pin in &pins {
        let (name, dir) = (&pin.name, project::vendored_dir(&pin.name));
        patch_use::check(&graph, name, &pin.version, &layout.root.join(&dir))?;
        eprintln!("ok: cargo builds {name} from {dir}");
    }
    builds::check(&layout.root, &graph)?;
    // A patch edit need not wait on a bench run: a stale report is named, not refused.
    match crate::bench_report::staleness(layout, &series)? {
        Some(warning) => eprintln!("warning: {warning}"),
        None => eprintln!(
            "ok: {} measured patches/ as it is",
            crate::project::REPORT_DIR
        ),
    }
    // The fuzzer's own `Cargo.lock` goes stale when a crate it builds gains a dependency, and CI
    // builds it `--locked`.
    let manifest = layout.root.join(FUZZ_MANIFEST);
    if !manifest.is_file() {
        return Ok(());
    }
    let stderr = match project::metadata_command(&manifest, &["--locked"]).exec() {
        Ok(_) => {
            eprintln!("ok: {FUZZ_MANIFEST} builds --locked");
            return Ok(());
        }
        Err(cargo_metadata::Error::CargoMetadata { stderr }) => stderr,
        Err(err) => return Err(err).context("cannot run `cargo metadata`"),
    };
    // cargo's own `help:` line suggests dropping `--locked`, which is not the fix here.
    let mut lines = stderr.lines().filter(|line| !line.trim().is_empty());
    let first = lines.clone().find(|line| line.starts_with("error"));
    let first = first.or(lines.next()).unwrap_or_default();
    if first.contains("--locked") {
        bail!(
            "{FUZZ_MANIFEST}'s lock file is not up to date: {first}\nrun `cargo update \
             --workspace --offline --manifest-path {FUZZ_MANIFEST}` to update it"
        );
    }
    if first.contains("no matching package") {
        bail!(
            "{FUZZ_MANIFEST} needs a crate that is not in cargo's cache: {first}\nrun `cargo \
             xtask fetch` once while online (it fetches the fuzzer's dependencies --locked, and \
             says so if the lock file is stale)"
        );
    }
    bail!("`cargo metadata` on {FUZZ_MANIFEST} failed: {first}")
}

/// Fails unless every patch's `index` lines name the blobs that applying the series to the
/// published crates gives, which a three-way apply (`git am -3`, `pr`, `vendor`) merges from.
pub fn check_index_lines(published: &[Published], patches: &[series::Patch]) -> Result<()> {
    let repo = &crate::trees::scratch()?;
    let trees = apply::in_turn(repo, expected::published_tree(repo, published)?, patches)?;
    for (patch, pair) in patches.iter().zip(trees.windows(2)) {
        if let Some(differs) = series::index_line_differs(repo, pair[0], pair[1], patch)? {
            bail!("{differs}");
        }
    }
    eprintln!("ok: every patch's index lines name the blobs the series gives");
    Ok(())
}

/// Fails on a number that the workspace's history gave a patch, that no patch holds now, and
/// that `[retired]` of `patches/stack.toml` does not list: a new patch would take it again.
/// Without the workspace's history (a copy, or a shallow clone) it checks what history there is.
pub fn retired_in_history(
    layout: &Layout,
    stack_file: &crate::series::stack_file::StackFile,
    patches: &[series::Patch],
) -> Result<()> {
    let Ok(repo) = git2::Repository::discover(&layout.root) else {
        return Ok(());
    };
    let (Some(workdir), Ok(head)) = (repo.workdir(), repo.head()) else {
        return Ok(());
    };
    let relative = layout.patches().canonicalize()?;
    let Ok(relative) = relative.strip_prefix(workdir.canonicalize()?) else {
        return Ok(());
    };
    let mut walk = repo.revwalk()?;
    walk.push(head.peel_to_commit()?.id())?;
    let mut seen = std::collections::BTreeMap::new();
    for id in walk {
        let commit = repo.find_commit(id?)?;
        let Ok(entry) = commit.tree()?.get_path(relative) else {
            continue;
        };
        let Some(folder) = entry.to_object(&repo)?.into_tree().ok() else {
            continue;
        };
        for file in folder.iter() {
            let name = file.name().unwrap_or_default();
            if name.ends_with(".patch") && name.len() > 4 {
                seen.entry(name[..4].to_string())
                    .or_insert_with(|| name.to_string());
            }
        }
    }
    for (number, name) in seen {
        let current = patches.iter().any(|p| p.number() == number);
        ensure!(
            current || stack_file.retired.contains_key(&number),
            "{number} was a patch's number ({name}, in this repository's history) and no patch \
             holds it now: add [retired.{number}] with `why = \"...\"` to patches/stack.toml, so \
             that no new patch takes it"
        );
    }
    Ok(())
}

/// Fails, naming what differs, unless the generated root and its `.gitattributes` line are current.
pub fn check_generated(layout: &Layout, published: &[Published]) -> Result<()> {
    generated_current(layout, &Series::load(&layout.patches())?, published)
}

fn generated_current(layout: &Layout, series: &Series, published: &[Published]) -> Result<()> {
    let (scratch, generated) = expected::generated(published, series)?;
    let mut problems = Vec::new();
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
        let actual = crate::trees::tree_of_dir(&scratch, &layout.root.join(dir))?;
        if actual == *tree {
            eprintln!("ok: {dir} is {what} (tree {actual})");
            continue;
        }
        let mut changes = crate::trees::changes(&scratch, *tree, actual)?;
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
    Ok(())
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
