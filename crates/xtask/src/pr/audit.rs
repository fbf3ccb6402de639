//! The calls of `LogitsProcessor::from_sampling` in the base, and how each treats temperature 0.

use anyhow::Result;
use git2::{Oid, Repository};
use serde::Serialize;

/// Who guards a call against temperature <= 0: the call itself, nobody, or its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Guard {
    Itself,
    None,
    Caller,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallSite {
    pub path: String,
    pub line: usize,
    pub guard: Guard,
}

/// Every `from_sampling(` call in the base outside its module and its tests (fixed temperatures).
pub fn audit(repo: &Repository, base: Oid) -> Result<Vec<CallSite>> {
    let own = ["generation/mod.rs", "tests/generation_tests.rs"];
    let mut sites = Vec::new();
    for file in crate::git::rust_files(repo, repo.find_commit(base)?.tree_id())? {
        let (path, text) = file?;
        if !own.iter().any(|own| path.ends_with(own)) {
            sites.extend(sites_in(&path, &text));
        }
    }
    Ok(sites)
}

/// The calls in one file: a guard compares a temperature with 0 in the 40 lines before the call.
pub fn sites_in(path: &str, text: &str) -> Vec<CallSite> {
    let lines: Vec<&str> = text.lines().collect();
    let mut sites = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if !line.contains("from_sampling(") || line.contains("fn from_sampling") {
            continue;
        }
        let before = &lines[index.saturating_sub(40)..index];
        let guarded = before.iter().any(|l| {
            let l = l.replace(' ', "");
            l.contains("temperature")
                && (l.contains("<=0") || l.contains("<1e-7") || l.contains("<0."))
        });
        let guard = if guarded {
            Guard::Itself
        } else if before.iter().any(|l| l.contains("Sampling::")) {
            Guard::None
        } else {
            Guard::Caller
        };
        let (path, line) = (path.to_string(), index + 1);
        sites.push(CallSite { path, line, guard });
    }
    sites
}
