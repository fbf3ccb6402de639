//! Published crates + patches: the trees that `vendor` writes and `check` expects.

use std::path::Path;

use anyhow::{ensure, Context, Result};
use git2::{FileMode, ObjectType, Oid};
use shared::{PUBLISHED_POINT, SERIES_POINT};

use crate::branches;
use crate::pin::{self, Pin};
use crate::project::{self, Layout, GENERATED_ROOT, POINTS_DIR, POINT_PARTS, TRANSFORMERS};
use crate::published::Published;
use crate::series::{self, Patch};
use crate::trees::Scratch;

/// Every published crate at its `path_in_vcs`, in one tree, so that a patch may change several.
pub(crate) fn published_tree(scratch: &Scratch, published: &[Published]) -> Result<Oid> {
    let crates: Vec<_> = published
        .iter()
        .map(|p| (p.pin.path_in_vcs.as_str(), p.files.as_slice()))
        .collect();
    scratch.tree_of_crates(&crates)
}

/// A generated folder: its path, what it is in words, and its tree.
pub(crate) struct Folder {
    pub dir: String,
    pub what: String,
    pub tree: Oid,
}

/// Every generated folder, in a new scratch repository: each crate patched by `patches` (a
/// `[PATCH]` line per patch), then, when candle-transformers is pinned, its published tests and
/// the points.
pub(crate) fn generated(
    layout: &Layout,
    crates: &[Published],
    patches: &[Patch],
) -> Result<(Scratch, Vec<Folder>)> {
    let scratch = Scratch::new()?;
    let builds_on = branches::builds_on(&layout.patches())?;
    let pins: Vec<Pin> = crates.iter().map(|p| p.pin.clone()).collect();
    let label = pin::label(&pins);
    let unpatched = published_tree(&scratch, crates)?;
    let mut tip = unpatched;
    for patch in patches {
        let diff = patch.diff()?;
        let paths = diff
            .deltas()
            .filter_map(|d| d.new_file().path().or(d.old_file().path()));
        for path in paths {
            let (file, shown) = (&patch.file_name, path.display());
            ensure!(
                pins.iter().any(|p| path.starts_with(&p.path_in_vcs)),
                "{file} changes {shown}, which is in none of the pinned crates ({label}): add its \
                 crate to patches/upstream.toml"
            );
        }
        tip = series::apply(&scratch.repo, tip, patch)
            .with_context(|| format!("patching {label}"))?;
        eprintln!("[PATCH] {label} <- {}", patch.file_name);
    }
    let repo = &scratch.repo;
    // Each folder with the sentences its marker adds about it, if any.
    let mut all: Vec<(Folder, Option<&str>)> = Vec::new();
    for krate in crates {
        let dir = project::vendored_dir(&krate.pin.name);
        let tree = part(&scratch, krate, tip, "").with_context(|| dir.clone())?;
        let what = format!("{} + patches/", krate.pin.label());
        all.push((Folder { dir, what, tree }, None));
    }
    let find = |name| crates.iter().find(|p| p.pin.name == name);
    if let Some(transformers) = find(TRANSFORMERS) {
        let dir = format!("{GENERATED_ROOT}/published-tests");
        let tree = part(&scratch, transformers, unpatched, "tests").with_context(|| dir.clone())?;
        let what = format!("{} as published", transformers.pin.label());
        all.push((Folder { dir, what, tree }, None));
        let branches =
            branches::branches(repo, unpatched, "the published crates", patches, &builds_on)?;
        // In the order the benches list them.
        let names = patches.iter().map(|p| p.number().to_string());
        let points = std::iter::once((PUBLISHED_POINT.to_string(), unpatched))
            .chain(names.zip(branches.iter().map(|b| b.tree)))
            .chain([(SERIES_POINT.to_string(), tip)]);
        let mut folder = repo.treebuilder(None)?;
        for (name, root) in points {
            let mut point = repo.treebuilder(None)?;
            for (dir, krate, path) in POINT_PARTS {
                if let Some(krate) = find(krate) {
                    let tree = part(&scratch, krate, root, path)
                        .with_context(|| format!("point {name}"))?;
                    point.insert(dir, tree, FileMode::Tree.into())?;
                }
            }
            folder.insert(&name, point.write()?, FileMode::Tree.into())?;
        }
        let labels: Vec<String> = crates.iter().map(|p| p.pin.label()).collect();
        let what = format!("the points of {} and patches/stack.toml", labels.join(", "));
        let about = "One folder per point that the benches measure (crates/points builds each \
            as a module): `published` is the published crates, each `NNNN` what the branch of \
            patch NNNN holds (its change on the branch that patches/stack.toml names, or on the \
            published crates), and `series` every patch applied.";
        let (dir, tree) = (POINTS_DIR.to_string(), folder.write()?);
        all.push((Folder { dir, what, tree }, Some(about)));
    }
    let marked = |(Folder { dir, what, tree }, about): (Folder, Option<&str>)| {
        let about = about.map_or(String::new(), |about| format!("\n\n{about}"));
        let marker = format!(
            "# Generated by `cargo xtask vendor`: never edit\n\n{dir} is {what}.{about}\n\n`cargo \
             xtask check` fails unless this folder is exactly that. To change it, change \
             `patches/` and run `cargo xtask vendor`.\n"
        );
        let mut folder = repo.treebuilder(Some(&repo.find_tree(tree)?))?;
        let blob = repo.blob(marker.as_bytes())?;
        folder.insert(project::MARKER, blob, FileMode::Blob.into())?;
        let tree = folder.write()?;
        Ok(Folder { dir, what, tree })
    };
    let all = all.into_iter().map(marked).collect::<Result<_>>()?;
    Ok((scratch, all))
}

/// The folder `path` of `krate` in `root` ("": all of it); for a file, a folder of it alone.
fn part(scratch: &Scratch, krate: &Published, root: Oid, path: &str) -> Result<Oid> {
    let full = format!("{}/{path}", krate.pin.path_in_vcs);
    let full = full.trim_matches('/');
    if full.is_empty() {
        return Ok(root);
    }
    let repo = &scratch.repo;
    let entry = repo
        .find_tree(root)?
        .get_path(Path::new(full))
        .with_context(|| format!("{} has no `{path}`", krate.pin.label()))?;
    if entry.kind() == Some(ObjectType::Tree) {
        return Ok(entry.id());
    }
    let mut folder = repo.treebuilder(None)?;
    folder.insert(entry.name_bytes(), entry.id(), entry.filemode())?;
    Ok(folder.write()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::published::tests::file;

    fn krate(path_in_vcs: &str) -> Published {
        Published {
            pin: Pin {
                name: "demo".into(),
                version: "0.1.0".into(),
                sha256: String::new(),
                commit: String::new(),
                path_in_vcs: path_in_vcs.into(),
            },
            files: Vec::new(),
        }
    }

    #[test]
    fn a_part_of_a_prefixed_tree_is_the_part_of_the_unprefixed_tree() -> Result<()> {
        let scratch = Scratch::new()?;
        let files = [file("src/lib.rs", "")];
        let prefixed = scratch.tree("candle-transformers", &files)?;
        let plain = scratch.tree("", &files)?;
        let part = |path| part(&scratch, &krate("candle-transformers"), prefixed, path);
        assert_eq!(part("")?, plain);
        assert_eq!(part("src")?, scratch.tree("", &[file("lib.rs", "")])?);
        assert!(part("missing").is_err());
        Ok(())
    }

    #[test]
    fn a_part_that_is_a_file_is_a_folder_of_it_alone() -> Result<()> {
        let scratch = Scratch::new()?;
        let tree = scratch.tree(
            "",
            &[file("a.rs", "a"), file("b.rs", "b"), file("c/d.rs", "")],
        )?;
        let only = part(&scratch, &krate(""), tree, "b.rs")?;
        assert_eq!(only, scratch.tree("", &[file("b.rs", "b")])?);
        assert!(part(&scratch, &krate(""), tree, "missing.rs").is_err());
        Ok(())
    }
}
