//! How the base relates to the pin, for the contributor's eyes only (never in a pull request).

use std::path::Path;

use anyhow::Result;
use git2::{Oid, Repository};
use serde::Serialize;

use crate::published::Published;
use crate::series::Patch;

/// The base against the commit the pinned crate was published from; `kind` names the variant
/// for `templates/summary.txt`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind")]
pub enum BaseRelation {
    Pinned,
    After { commits: usize },
    Diverged,
    PinNotInClone,
}

/// A file the patches change, in the base against the published crate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind")]
pub enum FileState {
    AsPublished,
    Changed { added: usize, removed: usize },
    NotInBase,
    NotPublished,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseReport {
    pub relation: BaseRelation,
    pub files: Vec<(String, FileState)>,
}

/// How `base` relates to the pin, and each file the patches change against the published crate.
pub(super) fn relate(
    repo: &Repository,
    base: Oid,
    published: &[Published],
    patches: &[Patch],
) -> Result<BaseReport> {
    let pinned = Oid::from_str(&published[0].pin.commit).ok();
    let pinned = pinned.filter(|id| repo.find_commit(*id).is_ok());
    let relation = match pinned {
        None => BaseRelation::PinNotInClone,
        Some(pinned) if pinned == base => BaseRelation::Pinned,
        Some(pinned) if repo.graph_descendant_of(base, pinned)? => BaseRelation::After {
            commits: repo.graph_ahead_behind(base, pinned)?.0,
        },
        Some(_) => BaseRelation::Diverged,
    };
    let tree = repo.find_commit(base)?.tree()?;
    let mut files: Vec<(String, FileState)> = Vec::new();
    for patch in patches {
        for path in crate::git::paths(&patch.diff()?) {
            let path = path.display().to_string();
            if files.iter().any(|(done, _)| *done == path) {
                continue;
            }
            let published_file = published.iter().find_map(|krate| {
                let inner = path.strip_prefix(&format!("{}/", krate.pin.path_in_vcs))?;
                krate.files.iter().find(|f| f.path == inner)
            });
            let in_base = tree.get_path(Path::new(&path)).ok().map(|e| e.id());
            let state = match (published_file, in_base) {
                (_, None) => FileState::NotInBase,
                (None, Some(_)) => FileState::NotPublished,
                (Some(file), Some(id)) => {
                    let blob = repo.find_blob(id)?;
                    let (old, new) = (&file.data, blob.content());
                    if old == new {
                        FileState::AsPublished
                    } else {
                        let diff = git2::Patch::from_buffers(old, None, new, None, None)?;
                        let (_, added, removed) = diff.line_stats()?;
                        FileState::Changed { added, removed }
                    }
                }
            };
            files.push((path, state));
        }
    }
    Ok(BaseReport { relation, files })
}
