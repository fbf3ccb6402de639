//! The call sites of `LogitsProcessor::from_sampling` in the base, and how each treats a
//! temperature of 0: what a pull request that makes `from_sampling` greedy there changes.

use anyhow::Result;
use git2::{Oid, Repository};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    /// Maps temperature <= 0 to `ArgMax` before calling.
    Itself,
    /// Builds its `Sampling` right there with no such guard.
    None,
    /// Takes its `Sampling` from its caller.
    Caller,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSite {
    pub path: String,
    pub line: usize,
    pub guard: Guard,
}

/// Every `from_sampling(` call in the base's Rust files, outside the module that defines it and
/// its own tests, which call it at fixed temperatures.
pub fn audit(repo: &Repository, base: Oid) -> Result<Vec<CallSite>> {
    let tree = repo.find_commit(base)?.tree()?;
    let own = ["generation/mod.rs", "tests/generation_tests.rs"];
    let mut files = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        let path = format!("{dir}{}", entry.name().unwrap_or_default());
        if path.ends_with(".rs") && !own.iter().any(|own| path.ends_with(own)) {
            files.push((path, entry.id()));
        }
        git2::TreeWalkResult::Ok
    })?;
    let mut sites = Vec::new();
    for (path, id) in files {
        let text = String::from_utf8_lossy(repo.find_blob(id)?.content()).into_owned();
        sites.extend(sites_in(&path, &text));
    }
    Ok(sites)
}

/// The calls in one file. A guard is a comparison of a temperature with 0 (or `1e-7`) in the 40
/// lines before the call; a `Sampling::` there means the call builds its own.
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
        let builds = before.iter().any(|l| l.contains("Sampling::"));
        let guard = match (guarded, builds) {
            (true, _) => Guard::Itself,
            (false, true) => Guard::None,
            (false, false) => Guard::Caller,
        };
        let (path, line) = (path.to_string(), index + 1);
        sites.push(CallSite { path, line, guard });
    }
    sites
}
