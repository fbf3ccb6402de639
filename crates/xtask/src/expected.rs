//! Published crates + patches: the trees that `vendor` writes and `check` expects.

use std::path::Path;

use anyhow::{ensure, Context, Result};
use git2::{FileMode, ObjectType, Oid, Repository};
use shared::{CONTROL_POINT, PUBLISHED_POINT, SERIES_POINT};

use crate::apply;
use crate::cherry_pick;
use crate::pin;
use crate::project::{self, GENERATED_ROOT, MARKER, POINTS_DIR, POINT_PARTS, TRANSFORMERS};
use crate::published::Published;
use crate::series::Series;
use crate::trees;

/// Every published crate at its `path_in_vcs`, in one tree, so that a patch may change several.
pub(crate) fn published_tree(repo: &Repository, published: &[Published]) -> Result<Oid> {
    let crates = published.iter().map(|p| (&*p.pin.path_in_vcs, &*p.files));
    crate::trees::tree_of_crates(repo, &crates.collect::<Vec<_>>())
}

/// A generated folder: its path, what it is in words, and its tree.
pub(crate) struct Folder {
    pub dir: String,
    pub what: String,
    pub tree: Oid,
}

/// Every generated folder, in a new scratch repository: each crate patched by `patches`, then,
/// when candle-transformers is pinned, its published tests and the points.
pub(crate) fn generated(
    crates: &[Published],
    series: &Series,
) -> Result<(Repository, Vec<Folder>)> {
    let scratch = trees::scratch()?;
    let (patches, builds_on) = (&series.patches, &series.stack.builds_on);
    let label = pin::label(&crates.iter().map(|p| p.pin.clone()).collect::<Vec<_>>());
    let unpatched = published_tree(&scratch, crates)?;
    for patch in patches {
        for path in crate::git::paths(&patch.diff()?) {
            let (file, shown) = (&patch.file_name, path.display());
            ensure!(
                crates.iter().any(|p| path.starts_with(&p.pin.path_in_vcs)),
                "{file} changes {shown}, which is in none of the pinned crates ({label}): add its \
                 crate to patches/upstream.toml"
            );
        }
    }
    let trees = apply::in_turn(&scratch, unpatched, patches);
    let trees = trees.with_context(|| format!("patching {label}"))?;
    let tip = trees[patches.len()];
    let repo = &scratch;
    let mut all = Vec::new();
    for krate in crates {
        let dir = project::vendored_dir(&krate.pin.name);
        let tree = part(repo, krate, tip, "").with_context(|| dir.clone())?;
        let what = format!("{} + patches/", krate.pin.label());
        all.push(marked(repo, dir, what, tree, false)?);
    }
    let find = |name| crates.iter().find(|p| p.pin.name == name);
    if let Some(transformers) = find(TRANSFORMERS) {
        let dir = format!("{GENERATED_ROOT}/published-tests");
        let tree = part(repo, transformers, unpatched, "tests").with_context(|| dir.clone())?;
        let what = format!("{} as published", transformers.pin.label());
        all.push(marked(repo, dir, what, tree, false)?);
        let branches = cherry_pick::on_published(repo, unpatched, patches, builds_on)?;
        // The control holds the published crates again: the same code, which crates/points
        // compiles as another module, so that it lands elsewhere in the binary.
        let names = patches.iter().map(|p| p.number().to_string());
        let points = [PUBLISHED_POINT, CONTROL_POINT].map(|name| (name.to_string(), unpatched));
        let points = points
            .into_iter()
            .chain(names.zip(branches.iter().map(|b| b.tree)))
            .chain([(SERIES_POINT.to_string(), tip)]);
        let tree = points_tree(repo, crates, points)?;
        let labels: Vec<String> = crates.iter().map(|p| p.pin.label()).collect();
        let what = format!("the points of {} and patches/stack.toml", labels.join(", "));
        all.push(marked(repo, POINTS_DIR.to_string(), what, tree, true)?);
    }
    Ok((scratch, all))
}

/// The generated folder `dir`, `tree` with its marker, which says what it is (and, for the
/// `points`, what each point holds).
fn marked(repo: &Repository, dir: String, what: String, tree: Oid, points: bool) -> Result<Folder> {
    let context = minijinja::context! { dir, what, points };
    let marker = crate::template::render("marker", context)? + "\n";
    let mut folder = repo.treebuilder(Some(&repo.find_tree(tree)?))?;
    folder.insert(MARKER, repo.blob(marker.as_bytes())?, FileMode::Blob.into())?;
    let tree = folder.write()?;
    Ok(Folder { dir, what, tree })
}

/// The points' folder: one folder per point, named, holding each of `POINT_PARTS` of the crates
/// in the point's tree; parts that name the same folder share it.
fn points_tree(
    repo: &Repository,
    crates: &[Published],
    points: impl Iterator<Item = (String, Oid)>,
) -> Result<Oid> {
    let mut folder = repo.treebuilder(None)?;
    for (name, root) in points {
        let mut point = repo.treebuilder(None)?;
        for (dir, krate, path) in POINT_PARTS {
            let Some(krate) = crates.iter().find(|p| p.pin.name == krate) else {
                continue;
            };
            let tree = part(repo, krate, root, path).with_context(|| format!("point {name}"))?;
            let mut shared = match point.get(dir)? {
                Some(entry) => repo.treebuilder(Some(&repo.find_tree(entry.id())?))?,
                None => repo.treebuilder(None)?,
            };
            for entry in repo.find_tree(tree)?.iter() {
                shared.insert(entry.name_bytes(), entry.id(), entry.filemode())?;
            }
            point.insert(dir, shared.write()?, FileMode::Tree.into())?;
        }
        folder.insert(&name, point.write()?, FileMode::Tree.into())?;
    }
    Ok(folder.write()?)
}

/// The folder `path` of `krate` in `root` ("": all of it); for a file, a folder of it alone.
fn part(repo: &Repository, krate: &Published, root: Oid, path: &str) -> Result<Oid> {
    let full = format!("{}/{path}", krate.pin.path_in_vcs);
    let full = full.trim_matches('/');
    if full.is_empty() {
        return Ok(root);
    }
    let entry = repo.find_tree(root)?.get_path(Path::new(full));
    let entry = entry.with_context(|| format!("{} has no `{path}`", krate.pin.label()))?;
    if entry.kind() == Some(ObjectType::Tree) {
        return Ok(entry.id());
    }
    let mut folder = repo.treebuilder(None)?;
    folder.insert(entry.name_bytes(), entry.id(), entry.filemode())?;
    Ok(folder.write()?)
}

#[cfg(test)]
#[path = "../tests/private/expected.rs"]
mod tests;
