//! `cargo xtask pr --verify`'s choice of crates and its export, on a small git2-built workspace
//! shaped like candle's: a library, an examples crate that uses the changed module, one that
//! depends on the library without using it, and one that does not depend on it.

use crate::kept;

use std::path::Path;

use anyhow::Result;
use git2::{Oid, Repository};
use xtask::pr::verify::{self, Crates};

fn tree_of(repo: &Repository, files: &[(&str, &str)]) -> Result<Oid> {
    let mut index = git2::Index::new()?;
    for (path, text) in files {
        let id = repo.blob(text.as_bytes())?;
        index.add(&git2::IndexEntry {
            ctime: git2::IndexTime::new(0, 0),
            mtime: git2::IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: 0o100644,
            uid: 0,
            gid: 0,
            file_size: text.len() as u32,
            id,
            flags: 0,
            flags_extended: 0,
            path: path.as_bytes().to_vec(),
        })?;
    }
    Ok(index.write_tree_to(repo)?)
}

const ROOT: &str =
    "[workspace]\nmembers = [\n    \"lib\",\n    \"examples\",\n    \"wasm/*\",\n]\n\n\
    [workspace.dependencies]\nmy-lib = { path = \"lib\" }\n";

fn files(module: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("Cargo.toml", ROOT),
        (
            "lib/Cargo.toml",
            "[package]\nname = \"my-lib\"\n\n[features]\nmetal = []\n",
        ),
        ("lib/src/lib.rs", "pub mod generation;\n"),
        ("lib/src/generation/mod.rs", module),
        (
            "examples/Cargo.toml",
            "[package]\nname = \"my-examples\"\n\n[dependencies]\nmy-lib = { workspace = true }\n",
        ),
        (
            "examples/examples/a.rs",
            "use my_lib::{generation::Sampler};\n",
        ),
        (
            "wasm/one/Cargo.toml",
            "[package]\nname = \"wasm-one\"\n\n[dependencies]\nmy-lib.workspace = true\n",
        ),
        ("wasm/one/src/lib.rs", "use my_lib::other;\n"),
        (
            "wasm/two/Cargo.toml",
            "[package]\nname = \"wasm-two\"\n\n[dependencies]\nother = \"1\"\n",
        ),
        ("wasm/two/src/lib.rs", "use generation::x;\n"),
    ]
}

#[test]
fn checks_cover_the_touched_crates_and_those_using_the_module() -> Result<()> {
    let temp = kept::dir("verify")?;
    let repo = Repository::init(temp.path())?;
    let before = tree_of(&repo, &files("pub struct Sampler;\n"))?;
    let after = tree_of(&repo, &files("pub struct Sampler;\npub fn greedy() {}\n"))?;
    let dir = temp.path().join("export");
    verify::export(&repo, None, after, &dir)?;
    let crates = verify::crates(&repo, before, after, &dir)?;
    assert_eq!(
        crates,
        Crates {
            touched: vec!["my-lib".into()],
            dependents: vec!["my-examples".into()],
            metal: vec!["my-lib".into()],
        }
    );
    let commands: Vec<String> = verify::commands(&crates)
        .iter()
        .map(|command| command.args.join(" "))
        .collect();
    assert_eq!(
        commands,
        [
            "fmt --all -- --check",
            "clippy -p my-lib -p my-examples --tests --examples --benches -- -D warnings",
            "test -p my-lib",
            "check -p my-lib --features metal --target aarch64-apple-darwin",
        ]
    );
    Ok(())
}

/// What cargo reads from the manifests: members from the list, not from `exclude`; dependencies
/// by package name, renamed (in the workspace's table too), of any kind and per target; `metal`
/// from the features only.
#[test]
fn manifests_are_read_as_cargo_reads_them() -> Result<()> {
    let temp = kept::dir("verify-manifests")?;
    let repo = Repository::init(temp.path().join("repo"))?;
    let uses = "use lib::generation::Sampler;\n";
    let files = |module: &'static str| {
        vec![
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"lib\", \"other\", \"uses/*\"]\nexclude = [\"excluded\"]\n\n\
                 [workspace.dependencies]\nlib = { package = \"my-lib\", path = \"lib\" }\n",
            ),
            (
                "lib/Cargo.toml",
                "[package]\nname = \"my-lib\"\n\n[features]\nmetal = []\n",
            ),
            ("lib/src/lib.rs", "pub mod generation;\n"),
            ("lib/src/generation.rs", module),
            (
                "other/Cargo.toml",
                "[package]\nname = \"my-other\"\n\n[dependencies]\nmetal = \"1\"\n\n\
                 [features]\nmetal-debug = []\n",
            ),
            ("other/src/lib.rs", module),
            (
                "uses/renamed/Cargo.toml",
                "[package]\nname = \"my-renamed\"\n\n\
                 [dev-dependencies]\nlib = { package = \"my-lib\", path = \"../../lib\" }\n",
            ),
            ("uses/renamed/src/lib.rs", uses),
            (
                "uses/inherited/Cargo.toml",
                "[package]\nname = \"my-inherited\"\n\n[dependencies]\nlib.workspace = true\n",
            ),
            ("uses/inherited/src/lib.rs", uses),
            (
                "uses/target/Cargo.toml",
                "[package]\nname = \"my-target\"\n\n\
                 [target.'cfg(unix)'.dependencies]\nmy-lib = { path = \"../../lib\" }\n",
            ),
            ("uses/target/src/lib.rs", uses),
            (
                "uses/lookalike/Cargo.toml",
                "[package]\nname = \"my-lookalike\"\n\n[dependencies]\nmy-lib-extra = \"1\"\n\n\
                 [features]\nmy-lib = []\n",
            ),
            ("uses/lookalike/src/lib.rs", uses),
            (
                "excluded/Cargo.toml",
                "[package]\nname = \"my-excluded\"\n\n[dependencies]\nmy-lib = { path = \"../lib\" }\n",
            ),
            ("excluded/src/lib.rs", uses),
        ]
    };
    let before = tree_of(&repo, &files("pub struct Sampler;\n"))?;
    let after = tree_of(&repo, &files("pub struct Sampler;\npub fn greedy() {}\n"))?;
    let dir = temp.path().join("export");
    verify::export(&repo, None, after, &dir)?;
    assert_eq!(
        verify::crates(&repo, before, after, &dir)?,
        Crates {
            touched: vec!["my-lib".into(), "my-other".into()],
            dependents: vec![
                "my-inherited".into(),
                "my-renamed".into(),
                "my-target".into()
            ],
            metal: vec!["my-lib".into()],
        }
    );
    // A change to a crate that the workspace excludes is refused, not left unchecked.
    let mut excluded = files("pub struct Sampler;\n");
    excluded.retain(|(path, _)| *path != "excluded/src/lib.rs");
    excluded.push(("excluded/src/lib.rs", "// changed\n"));
    let excluded = tree_of(&repo, &excluded)?;
    let err = verify::crates(&repo, before, excluded, &dir).unwrap_err();
    assert_eq!(
        err.to_string(),
        "excluded/src/lib.rs is in excluded, which is not a member of the workspace: candle's CI \
         commands do not check it; check it by hand, or run pr without --verify"
    );
    Ok(())
}

#[test]
fn the_export_rewrites_only_what_changed() -> Result<()> {
    let temp = kept::dir("verify-export")?;
    let repo = Repository::init(temp.path().join("repo"))?;
    let before = tree_of(&repo, &files("pub struct Sampler;\n"))?;
    let mut changed = files("pub struct Sampler;\npub fn greedy() {}\n");
    changed.retain(|(path, _)| *path != "wasm/two/src/lib.rs");
    changed.push(("wasm/three/src/lib.rs", "// new\n"));
    let after = tree_of(&repo, &changed)?;
    // A file that becomes executable, as git records a mode change.
    let mut update = git2::build::TreeUpdateBuilder::new();
    let script = repo
        .find_tree(after)?
        .get_path(Path::new("examples/examples/a.rs"))?;
    let executable = git2::FileMode::BlobExecutable;
    update.upsert("examples/examples/a.rs", script.id(), executable);
    let after = update.create_updated(&repo, &repo.find_tree(after)?)?;

    let dir = temp.path().join("export");
    verify::export(&repo, None, before, &dir)?;
    let untouched = dir.join("lib/Cargo.toml");
    let old_time = std::fs::metadata(&untouched)?.modified()?;
    std::thread::sleep(std::time::Duration::from_millis(20));
    verify::export(&repo, Some(before), after, &dir)?;
    assert_eq!(
        std::fs::read_to_string(dir.join("lib/src/generation/mod.rs"))?,
        "pub struct Sampler;\npub fn greedy() {}\n"
    );
    assert!(!dir.join("wasm/two/src/lib.rs").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("wasm/three/src/lib.rs"))?,
        "// new\n"
    );
    assert_eq!(std::fs::metadata(&untouched)?.modified()?, old_time);
    // The export equals the tree, file for file and mode for mode: a tree's id is its content.
    let on_disk = xtask::trees::tree_of_dir(&xtask::trees::scratch()?, &dir)?;
    assert_eq!(on_disk, after);
    Ok(())
}
