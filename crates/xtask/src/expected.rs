//! Published crates + patches: the trees that `vendor` writes and `check` expects.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use git2::Oid;
use shared::{PUBLISHED_POINT, SERIES_POINT};

use crate::branches;
use crate::pin;
use crate::project::{self, Applied, Generated, Layout, Source};
use crate::published::Published;
use crate::series::{self, Patch};
use crate::trees::Scratch;

/// Every published crate where candle's repository holds it (its `path_in_vcs`), in one tree,
/// so that one patch may change files of several crates.
pub(crate) fn published_tree(scratch: &Scratch, published: &[Published]) -> Result<Oid> {
    let crates: Vec<_> = published
        .iter()
        .map(|p| (p.pin.path_in_vcs.as_str(), p.files.as_slice()))
        .collect();
    scratch.tree_of_crates(&crates)
}

/// The published crates' tree, then the tree after each patch in order, one `[PATCH]` line each
/// on stderr. A patch that touches a file outside every pinned crate fails, naming the file.
fn patched_trees(
    scratch: &Scratch,
    published: &[Published],
    patches: &[Patch],
) -> Result<Vec<Oid>> {
    let pins: Vec<_> = published.iter().map(|p| p.pin.clone()).collect();
    let label = pin::label(&pins);
    let mut trees = vec![published_tree(scratch, published)?];
    for patch in patches {
        for delta in patch.diff()?.deltas() {
            let Some(path) = delta.new_file().path().or(delta.old_file().path()) else {
                continue;
            };
            if !pins.iter().any(|p| path.starts_with(&p.path_in_vcs)) {
                bail!(
                    "{} changes {}, which is in none of the pinned crates ({}): add its crate to \
                     patches/upstream.toml",
                    patch.file_name,
                    path.display(),
                    label
                );
            }
        }
        let tree = *trees.last().expect("the published tree comes first");
        let tree = series::apply(&scratch.repo, tree, patch)
            .with_context(|| format!("patching {label}"))?;
        eprintln!("[PATCH] {label} <- {}", patch.file_name);
        trees.push(tree);
    }
    Ok(trees)
}

/// Every generated folder of the crates `published` holds, with the tree it must hold.
/// `patches/stack.toml` decides what each point holds.
pub(crate) fn generated(
    layout: &Layout,
    scratch: &Scratch,
    published: &[Published],
    patches: &[Patch],
) -> Result<Vec<(Generated, Oid)>> {
    let builds_on = branches::builds_on(&layout.patches())?;
    let trees = patched_trees(scratch, published, patches)?;
    project::generated(published)
        .into_iter()
        .map(|g| -> Result<(Generated, Oid)> {
            let tree = match &g.source {
                Source::Part {
                    krate,
                    crate_dir,
                    only,
                    applied,
                } => {
                    let root = match applied {
                        Applied::None => trees[0],
                        Applied::All => trees[patches.len()],
                    };
                    part(scratch, published, root, krate, crate_dir, only)
                        .with_context(|| g.dir.clone())?
                }
                Source::Points => points(scratch, published, &trees, patches, &builds_on)?,
            };
            let marker = marker(&g, published);
            let files = [(project::MARKER.to_string(), marker.as_bytes())];
            let tree = scratch.compose(&[(String::new(), tree)], &files)?;
            Ok((g, tree))
        })
        .collect()
}

/// The folder `crate_dir` of `krate` in `root` (the files `only` names, or all).
fn part(
    scratch: &Scratch,
    published: &[Published],
    root: Oid,
    krate: &str,
    crate_dir: &str,
    only: &[&str],
) -> Result<Oid> {
    let krate = published
        .iter()
        .find(|p| p.pin.name == krate)
        .with_context(|| format!("{krate} is not pinned"))?;
    let path = [krate.pin.path_in_vcs.as_str(), crate_dir]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("/");
    let tree = scratch
        .subtree(root, &path)
        .with_context(|| format!("{} has no `{crate_dir}`", krate.pin.label()))?;
    if only.is_empty() {
        return Ok(tree);
    }
    scratch
        .only(tree, only)
        .with_context(|| format!("{} `{crate_dir}`", krate.pin.label()))
}

/// What `generated` is made from, in words: for messages and its marker.
pub(crate) fn describe(generated: &Generated, published: &[Published]) -> String {
    match &generated.source {
        Source::Part { krate, applied, .. } => {
            let label = published
                .iter()
                .find(|p| &p.pin.name == krate)
                .map_or(krate.clone(), |p| p.pin.label());
            match applied {
                Applied::None => format!("{label} as published"),
                Applied::All => format!("{label} + patches/"),
            }
        }
        Source::Points => format!(
            "the points of {} and patches/stack.toml",
            published
                .iter()
                .map(|p| p.pin.label())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The marker file (`project::MARKER`) of `generated`.
fn marker(generated: &Generated, published: &[Published]) -> String {
    let points = match generated.source {
        Source::Points => {
            "\n\nOne folder per point that the benches measure (crates/points builds each as a \
             module): `published` is the published crates, each `NNNN` what the branch of patch \
             NNNN holds (its change on the branch that patches/stack.toml names, or on the \
             published crates), and `series` every patch applied."
        }
        Source::Part { .. } => "",
    };
    format!(
        "# Generated by `cargo xtask vendor`: never edit\n\n{} is {}.{points}\n\n`cargo xtask \
         check` fails unless this folder is exactly that. To change it, change `patches/` and \
         run `cargo xtask vendor`.\n",
        generated.dir,
        describe(generated, published)
    )
}

/// The points' folder (`project::POINTS_DIR`).
fn points(
    scratch: &Scratch,
    published: &[Published],
    trees: &[Oid],
    patches: &[Patch],
    builds_on: &BTreeMap<String, String>,
) -> Result<Oid> {
    let branches = branches::branches(
        &scratch.repo,
        trees[0],
        "the published crates",
        patches,
        builds_on,
    )?;
    // In the order the benches list them: the published crates, each patch's branch, the
    // whole series.
    let names = patches.iter().map(|p| p.number().to_string());
    let points = std::iter::once((PUBLISHED_POINT.to_string(), trees[0]))
        .chain(names.zip(branches.iter().map(|b| b.tree)))
        .chain([(SERIES_POINT.to_string(), trees[patches.len()])]);
    let mut parts = Vec::new();
    for (name, root) in points {
        for (folder, krate, crate_dir, only) in project::POINT_PARTS {
            if published.iter().any(|p| p.pin.name == krate) {
                let tree = part(scratch, published, root, krate, crate_dir, only)
                    .with_context(|| format!("point {name}"))?;
                parts.push((format!("{name}/{folder}"), tree));
            }
        }
    }
    scratch.compose(&parts, &[])
}
