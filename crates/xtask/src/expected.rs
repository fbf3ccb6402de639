//! Published crates + patches: the trees that `vendor` writes and `check` expects.

use std::path::Path;

use anyhow::{ensure, Context, Result};
use git2::{ObjectType, Oid};
use shared::{PUBLISHED_POINT, SERIES_POINT};

use crate::branches;
use crate::pin::{self, Pin};
use crate::project::{self, Layout, GENERATED_ROOT, POINTS_DIR, POINT_PARTS};
use crate::published::Published;
use crate::series::{self, Patch};
use crate::trees::Scratch;

const TREE: i32 = 0o040000;

/// Every published crate where candle's repository holds it (its `path_in_vcs`), in one tree,
/// so that one patch may change files of several crates.
pub(crate) fn published_tree(scratch: &Scratch, published: &[Published]) -> Result<Oid> {
    let crates: Vec<_> = published
        .iter()
        .map(|p| (p.pin.path_in_vcs.as_str(), p.files.as_slice()))
        .collect();
    scratch.tree_of_crates(&crates)
}

/// A folder that `vendor` writes and `check` compares: its path, what it is in words, its tree.
pub(crate) struct Generated {
    pub(crate) dir: String,
    pub(crate) what: String,
    pub(crate) tree: Oid,
}

/// Every generated folder of the crates `published` holds, after one `[PATCH]` line per patch on
/// stderr: each crate patched, then, when candle-transformers is pinned, its tests as published
/// (testbed runs them on the `published` point) and the points that `patches/stack.toml` gives.
pub(crate) fn generated(
    layout: &Layout,
    scratch: &Scratch,
    published: &[Published],
    patches: &[Patch],
) -> Result<Vec<Generated>> {
    let builds_on = branches::builds_on(&layout.patches())?;
    let pins: Vec<Pin> = published.iter().map(|p| p.pin.clone()).collect();
    let label = pin::label(&pins);
    let unpatched = published_tree(scratch, published)?;
    let mut tip = unpatched;
    for patch in patches {
        for delta in patch.diff()?.deltas() {
            let Some(path) = delta.new_file().path().or(delta.old_file().path()) else {
                continue;
            };
            ensure!(
                pins.iter().any(|p| path.starts_with(&p.path_in_vcs)),
                "{} changes {}, which is in none of the pinned crates ({}): add its crate to \
                     patches/upstream.toml",
                patch.file_name,
                path.display(),
                label
            );
        }
        tip = series::apply(&scratch.repo, tip, patch)
            .with_context(|| format!("patching {label}"))?;
        eprintln!("[PATCH] {label} <- {}", patch.file_name);
    }
    let repo = &scratch.repo;
    let mut all = Vec::new();
    for krate in published {
        let dir = project::vendored_dir(&krate.pin.name);
        let tree = part(scratch, krate, tip, "").with_context(|| dir.clone())?;
        all.push((dir, format!("{} + patches/", krate.pin.label()), tree, ""));
    }
    let find = |name| published.iter().find(|p| p.pin.name == name);
    if let Some(transformers) = find(POINT_PARTS[0].1) {
        let dir = format!("{GENERATED_ROOT}/published-tests");
        let tree = part(scratch, transformers, unpatched, "tests").with_context(|| dir.clone())?;
        all.push((
            dir,
            format!("{} as published", transformers.pin.label()),
            tree,
            "",
        ));
        let branches =
            branches::branches(repo, unpatched, "the published crates", patches, &builds_on)?;
        // In the order the benches list them: the published crates, each patch's branch, the
        // whole series.
        let names = patches.iter().map(|p| p.number().to_string());
        let points = std::iter::once((PUBLISHED_POINT.to_string(), unpatched))
            .chain(names.zip(branches.iter().map(|b| b.tree)))
            .chain([(SERIES_POINT.to_string(), tip)]);
        let mut folder = repo.treebuilder(None)?;
        for (name, root) in points {
            let mut point = repo.treebuilder(None)?;
            for (dir, krate, path) in POINT_PARTS {
                if let Some(krate) = find(krate) {
                    let tree = part(scratch, krate, root, path)
                        .with_context(|| format!("point {name}"))?;
                    point.insert(dir, tree, TREE)?;
                }
            }
            folder.insert(&name, point.write()?, TREE)?;
        }
        let labels: Vec<String> = published.iter().map(|p| p.pin.label()).collect();
        let what = format!("the points of {} and patches/stack.toml", labels.join(", "));
        let about = "\n\nOne folder per point that the benches measure (crates/points builds each \
            as a module): `published` is the published crates, each `NNNN` what the branch of \
            patch NNNN holds (its change on the branch that patches/stack.toml names, or on the \
            published crates), and `series` every patch applied.";
        all.push((POINTS_DIR.to_string(), what, folder.write()?, about));
    }
    let marked = |(dir, what, tree, about): (String, String, Oid, &str)| {
        let marker = format!(
            "# Generated by `cargo xtask vendor`: never edit\n\n{dir} is {what}.{about}\n\n`cargo \
             xtask check` fails unless this folder is exactly that. To change it, change \
             `patches/` and run `cargo xtask vendor`.\n"
        );
        let mut folder = repo.treebuilder(Some(&repo.find_tree(tree)?))?;
        folder.insert(project::MARKER, repo.blob(marker.as_bytes())?, 0o100644)?;
        let tree = folder.write()?;
        Ok(Generated { dir, what, tree })
    };
    all.into_iter().map(marked).collect()
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
    use crate::published::CrateFile;

    fn file(path: &str, data: &str) -> CrateFile {
        CrateFile {
            path: path.into(),
            data: data.as_bytes().to_vec(),
            executable: false,
        }
    }

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
