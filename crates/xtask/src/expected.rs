//! Published crates + patches: the trees that `vendor` writes and `check` expects.

use anyhow::{bail, Context, Result};
use git2::Oid;

use crate::pin;
use crate::project::{self, Applied, Generated};
use crate::published::Published;
use crate::series::{self, Patch};
use crate::trees::Scratch;

/// Every published crate where candle's repository holds it (its `path_in_vcs`), in one tree,
/// so that one patch may change files of several crates.
pub fn published_tree(scratch: &Scratch, published: &[Published]) -> Result<Oid> {
    let crates: Vec<(&str, &[crate::published::CrateFile])> = published
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

/// The tree each of `generated` must hold, in the same order.
pub fn expected_trees(
    scratch: &Scratch,
    published: &[Published],
    patches: &[Patch],
    generated: &[Generated],
) -> Result<Vec<Oid>> {
    let trees = patched_trees(scratch, published, patches)?;
    generated
        .iter()
        .map(|g| {
            let krate = published
                .iter()
                .find(|p| p.pin.name == g.krate)
                .with_context(|| format!("{}: {} is not pinned", g.dir, g.krate))?;
            let root = trees[applied_count(g.applied, patches)];
            let path = [krate.pin.path_in_vcs.as_str(), g.crate_dir]
                .into_iter()
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
                .join("/");
            let tree = scratch.subtree(root, &path).with_context(|| {
                format!("{}: {} has no `{}`", g.dir, krate.pin.label(), g.crate_dir)
            })?;
            if g.only.is_empty() {
                return Ok(tree);
            }
            scratch
                .only(tree, g.only)
                .with_context(|| format!("{}: {} `{}`", g.dir, krate.pin.label(), g.crate_dir))
        })
        .collect()
}

/// How many patches of the series `applied` means, from the first.
pub fn applied_count(applied: Applied, patches: &[Patch]) -> usize {
    match applied {
        Applied::None => 0,
        Applied::All => patches.len(),
        Applied::Before(prefix) => patches
            .iter()
            .take_while(|p| p.file_name.as_str() < prefix)
            .count(),
    }
}

/// The generated folders of the crates `published` holds.
pub fn generated_for(published: &[Published]) -> Vec<Generated> {
    let names: Vec<&str> = published.iter().map(|p| p.pin.name.as_str()).collect();
    project::generated(&names)
}
