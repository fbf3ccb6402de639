//! Published crate + patches: the trees that `vendor` writes and `check` expects.

use anyhow::{Context, Result};
use git2::Oid;

use crate::project::Generated;
use crate::published::Published;
use crate::series::{self, Patch};
use crate::trees::Scratch;

/// The published crate as its upstream repository has it (under `path_in_vcs`), with every
/// patch applied in order, one `[PATCH]` line each on stderr.
pub fn patched_tree(scratch: &Scratch, published: &Published, patches: &[Patch]) -> Result<Oid> {
    let mut tree = scratch.tree(&published.pin.path_in_vcs, &published.files)?;
    for patch in patches {
        tree = series::apply(&scratch.repo, tree, patch)
            .with_context(|| format!("patching {}", published.pin.label()))?;
        eprintln!("[PATCH] {} <- {}", published.pin.label(), patch.file_name);
    }
    Ok(tree)
}

/// The tree each of `generated` must hold, in the same order.
pub fn expected_trees(
    scratch: &Scratch,
    published: &Published,
    patches: &[Patch],
    generated: &[Generated],
) -> Result<Vec<Oid>> {
    let prefix = &published.pin.path_in_vcs;
    let base = scratch.tree(prefix, &published.files)?;
    let patched = patched_tree(scratch, published, patches)?;
    generated
        .iter()
        .map(|g| {
            let root = if g.patched { patched } else { base };
            let path = [prefix.as_str(), g.crate_dir]
                .into_iter()
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
                .join("/");
            scratch
                .subtree(root, &path)
                .with_context(|| format!("{}: the published crate has no `{}`", g.dir, g.crate_dir))
        })
        .collect()
}
