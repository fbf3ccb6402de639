//! Fixtures for the xtask tests: a small crate archive shaped like candle-transformers, around
//! the real published `generation/mod.rs`, and patches made by git2 from real commits.
#![allow(dead_code)]

pub mod stack;

use std::path::Path;

use anyhow::Result;
use git2::{Oid, Repository, Signature};
use tempfile::TempDir;
use xtask::project::Layout;
use xtask::published::{self, CrateFile, Published};

/// The published `generation/mod.rs`: `cargo xtask check` proves this copy is byte for byte the
/// one in the pinned `.crate`.
pub fn published_generation() -> Vec<u8> {
    let path = Layout::workspace()
        .root
        .join("crates/vendor/points/published/generation/mod.rs");
    std::fs::read(path).expect("the upstream copy of generation/mod.rs")
}

pub fn file(path: &str, data: impl Into<Vec<u8>>) -> CrateFile {
    CrateFile {
        path: path.into(),
        data: data.into(),
        executable: false,
    }
}

/// The published `tests/generation_tests.rs`, likewise checked.
pub fn published_generation_tests() -> Vec<u8> {
    let path = Layout::workspace()
        .root
        .join("crates/vendor/published-tests/generation_tests.rs");
    std::fs::read(path).expect("the upstream copy of generation_tests.rs")
}

/// The files of the fixture crate, as `cargo package` lays them out.
pub fn crate_files() -> Vec<CrateFile> {
    vec![
        file(
            ".cargo_vcs_info.json",
            "{\n  \"git\": {\n    \"sha1\": \"59f8e903ca80a32ea7f8514b39748fc979e69e82\"\n  },\n  \"path_in_vcs\": \"candle-transformers\"\n}",
        ),
        file("Cargo.toml", "[package]\nname = \"candle-transformers\"\nversion = \"0.11.1\"\n"),
        file("src/generation/mod.rs", published_generation()),
        file("src/lib.rs", "pub mod generation;\n"),
        file("tests/generation_tests.rs", published_generation_tests()),
    ]
}

pub fn published() -> Result<Published> {
    let bytes = pack("candle-transformers", "0.11.1", &crate_files())?;
    published::unpack(&bytes, "candle-transformers", "0.11.1")
}

/// A `.crate` made from `files`, as `cargo package` lays it out.
pub fn pack(name: &str, version: &str, files: &[CrateFile]) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ));
    for file in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(file.data.len() as u64);
        header.set_mode(if file.executable { 0o755 } else { 0o644 });
        let path = format!("{name}-{version}/{}", file.path);
        builder.append_data(&mut header, path, file.data.as_slice())?;
    }
    Ok(builder.into_inner()?.finish()?)
}

/// A temporary workspace: `patches/` with the pin of the fixture crate, nothing generated yet.
pub struct Workspace {
    pub temp: TempDir,
    pub layout: Layout,
    pub published: Published,
}

impl Workspace {
    pub fn add_patch(&self, file_name: &str, patch: &[u8]) -> Result<()> {
        Ok(std::fs::write(
            self.layout.patches().join(file_name),
            patch,
        )?)
    }
}

pub fn workspace() -> Result<Workspace> {
    let temp = crate::kept::dir("xtask-test")?;
    let layout = Layout::at(temp.path().to_path_buf());
    let published = published()?;
    std::fs::create_dir_all(layout.patches())?;
    std::fs::write(
        layout.pin(),
        xtask::pin::render(std::slice::from_ref(&published.pin)),
    )?;
    Ok(Workspace {
        temp,
        layout,
        published,
    })
}

/// A repository holding `files` under `candle-transformers/` as its first commit, as candle's
/// repository holds the published crate.
pub fn upstream_repo(dir: &Path, files: &[CrateFile]) -> Result<Repository> {
    let mut options = git2::RepositoryInitOptions::new();
    options.initial_head("main");
    let repo = Repository::init_opts(dir, &options)?;
    {
        let mut config = repo.config()?;
        config.set_str("user.name", "Upstream")?;
        config.set_str("user.email", "upstream@example.com")?;
    }
    for file in files {
        let path = dir.join("candle-transformers").join(&file.path);
        std::fs::create_dir_all(path.parent().unwrap())?;
        std::fs::write(path, &file.data)?;
    }
    commit_all(&repo, "Initial commit")?;
    Ok(repo)
}

/// Commits everything in the work tree on the current branch.
pub fn commit_all(repo: &Repository, message: &str) -> Result<Oid> {
    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let author = Signature::new(
        "Ada Contributor",
        "ada@example.com",
        &git2::Time::new(1_700_000_000, 60),
    )?;
    let parents = match repo.head() {
        Ok(head) => vec![head.peel_to_commit()?],
        Err(_) => vec![],
    };
    let parents: Vec<&git2::Commit> = parents.iter().collect();
    Ok(repo.commit(Some("HEAD"), &author, &author, message, &tree, &parents)?)
}

/// Replaces `from` with `to` (once) in the file at `path` of a work tree.
pub fn edit(root: &Path, path: &str, from: &str, to: &str) -> Result<()> {
    let path = root.join(path);
    let text = std::fs::read_to_string(&path)?;
    assert_eq!(
        text.matches(from).count(),
        1,
        "`{from}` should occur once in {}",
        path.display()
    );
    std::fs::write(path, text.replacen(from, to, 1))?;
    Ok(())
}

/// `git format-patch` of a commit that makes `edit` to `base`, written by our own `series::email`.
pub fn make_patch(
    base: &[CrateFile],
    message: &str,
    change: impl FnOnce(&Path) -> Result<()>,
) -> Result<Vec<u8>> {
    let temp = crate::kept::dir("patch-repo")?;
    let repo = upstream_repo(temp.path(), base)?;
    change(temp.path())?;
    let commit = repo.find_commit(commit_all(&repo, message)?)?;
    let email = xtask::series::email(&commit)?;
    Ok(email)
}

/// A change to a work tree, as a test makes it.
pub type Change = Box<dyn FnOnce(&Path) -> Result<()>>;

/// `git format-patch` files of commits that make `changes` one after another on `base`: each
/// commit's subject and mail, written by our own `series::email`.
pub fn make_series(
    base: &[CrateFile],
    changes: Vec<(&str, Change)>,
) -> Result<Vec<(String, Vec<u8>)>> {
    let temp = crate::kept::dir("series-repo")?;
    let repo = upstream_repo(temp.path(), base)?;
    let mut emails = Vec::new();
    for (message, change) in changes {
        change(temp.path())?;
        let commit = repo.find_commit(commit_all(&repo, message)?)?;
        let subject = commit.summary()?.unwrap_or_default().to_string();
        emails.push((subject, xtask::series::email(&commit)?));
    }
    Ok(emails)
}

/// The edit that the fixture's first patch makes.
pub const OLD_LINE: &str = "if v < 1e-7 { None } else { Some(v) }";
pub const NEW_LINE: &str = "if v < 1e-6 { None } else { Some(v) }";

pub fn raise_threshold(root: &Path) -> Result<()> {
    edit(
        root,
        "candle-transformers/src/generation/mod.rs",
        OLD_LINE,
        NEW_LINE,
    )
}

/// Every file below `dir` with its sha256, to show that a folder did not change.
pub fn snapshot(dir: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let data = std::fs::read(&path).unwrap_or_default();
                files.push((path.display().to_string(), shared::sha256_hex(&data)));
            }
        }
    }
    files.sort();
    files
}

/// A bench report of 21 rounds on a toy machine, with `control` as its A/A pair and `patches` as
/// its steps, no decode loop, and no commands or patch hashes recorded.
pub fn report(
    control: xtask::report::data::Step,
    patches: Vec<xtask::report::data::Step>,
) -> xtask::report::data::Report {
    xtask::report::data::Report {
        version: xtask::report::data::VERSION,
        machine: "a machine, 2 threads".to_string(),
        date: "2026-12-01".to_string(),
        commit: "abc1234".to_string(),
        crate_label: "candle-transformers 0.11.1".to_string(),
        model: "m.gguf".to_string(),
        vocab: 49152,
        seed: 42,
        temperature: 0.8,
        rounds: 21,
        short: false,
        commands: Vec::new(),
        patch_hashes: Default::default(),
        stale: Vec::new(),
        decode_tokens: 16,
        decode_rounds: 11,
        control,
        patches,
        decode: None,
    }
}

/// `cargo xtask vendor` in `layout` on `published`, the pin as it is.
pub fn vendor(
    layout: &xtask::project::Layout,
    published: &[Published],
) -> Result<xtask::vendor::Vendored> {
    let lines = published
        .iter()
        .map(|p| xtask::pin::Line::Pinned(p.pin.clone()));
    xtask::vendor::update(layout, &lines.collect::<Vec<_>>(), None, published)
}

/// `check`'s test of the generated folders in `layout`, for its `patches/` on `published`.
pub fn check_generated(
    layout: &xtask::project::Layout,
    published: &[Published],
) -> Result<Vec<xtask::check::Proved>> {
    let series = xtask::series::Series::load(&layout.patches())?;
    xtask::check::generated_current(layout, &series, published)
}
