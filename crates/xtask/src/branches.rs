//! Each patch's tree cherry-picked onto its parent's: `pr` commits these, `vendor` benches them.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};

use crate::fsutil::read_if_exists;
use crate::series::{self, Patch};

/// `patches/stack.toml`'s `"0005" = "0002"`: 0005's branch builds on 0002's, others on the base.
pub(crate) fn builds_on(patches_dir: &Path) -> Result<BTreeMap<String, String>> {
    let path = patches_dir.join("stack.toml");
    let shown = path.display();
    let Some(text) = read_if_exists(&path)? else {
        return Ok(BTreeMap::new());
    };
    let document = text.parse::<toml_edit::DocumentMut>();
    let document = document.with_context(|| format!("{shown} is not TOML"))?;
    document
        .iter()
        .map(|(patch, parent)| match parent.as_str() {
            Some(parent) if parent < patch => Ok((patch.to_string(), parent.to_string())),
            _ => bail!("{shown}: `{patch}` must name an earlier patch's number, as in \"0001\""),
        })
        .collect()
}

/// One patch's branch: the patch whose branch it starts from (`None`: the base), and its tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Branch {
    pub parent: Option<usize>,
    pub tree: Oid,
}

/// Each patch's change in the linear series, merged onto the branch `builds_on` names or `base`.
pub(crate) fn branches(
    repo: &Repository,
    base: Oid,
    base_name: &str,
    patches: &[Patch],
    builds_on: &BTreeMap<String, String>,
) -> Result<Vec<Branch>> {
    let mut linear = base;
    let mut branches: Vec<Branch> = Vec::new();
    for patch in patches {
        let (file, after) = (&patch.file_name, series::apply(repo, linear, patch)?);
        let parent = builds_on.get(patch.number()).map(|wanted| {
            let mut earlier = patches[..branches.len()].iter();
            earlier.position(|p| p.number() == wanted).with_context(|| {
                format!(
                    "{file} builds on {wanted} (patches/stack.toml), which is not in the series \
                     before it"
                )
            })
        });
        let parent = parent.transpose()?;
        let onto = parent.map_or(base, |index| branches[index].tree);
        let [ancestor, ours, theirs] = [linear, onto, after].map(|id| repo.find_tree(id));
        let mut index = repo.merge_trees(&ancestor?, &ours?, &theirs?, None)?;
        if index.has_conflicts() {
            let on = match parent {
                None => format!("the base ({base_name})"),
                Some(i) => format!("the branch of {}", patches[i].file_name),
            };
            bail!(
                "{file} does not merge onto {on} without a conflict: name the patch it builds on \
                 in patches/stack.toml"
            );
        }
        let tree = index.write_tree_to(repo)?;
        branches.push(Branch { parent, tree });
        linear = after;
    }
    Ok(branches)
}
