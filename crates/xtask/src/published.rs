//! The published crate: the `.crate` file that cargo downloads from crates.io.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use fs_err as fs;

use crate::cmd;
use crate::pin::Pin;
use crate::project::Layout;

/// A file of the crate, its path relative to the crate's root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrateFile {
    pub path: String,
    pub data: Vec<u8>,
    pub executable: bool,
}

/// An unpacked `.crate`.
#[derive(Clone, Debug)]
pub struct Published {
    pub pin: Pin,
    pub files: Vec<CrateFile>,
}

/// The `.crate` in cargo's cache, if any: cargo keeps them in one folder per registry index.
fn find_cached(name: &str, version: &str) -> Option<PathBuf> {
    let file = format!("{name}-{version}.crate");
    let entries = fs::read_dir(cache()).into_iter().flatten().flatten();
    let paths = entries.map(|entry| entry.path().join(&file));
    paths.filter(|path| path.is_file()).min()
}

fn cache() -> PathBuf {
    let home = Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cargo");
    let cargo_home = std::env::var_os("CARGO_HOME").map_or(home, PathBuf::from);
    cargo_home.join("registry").join("cache")
}

/// The pinned crate from cargo's cache, checked against the pin; never goes online.
pub fn load_pinned(pin: &Pin) -> Result<Published> {
    let (name, version, label) = (&pin.name, &pin.version, pin.label());
    let path = find_cached(name, version).with_context(|| {
        format!(
            "{label} is not in cargo's cache (no {name}-{version}.crate under {}): run `cargo \
             xtask fetch` once while online",
            cache().display()
        )
    })?;
    load_at(&path, pin)
}

/// The `.crate` at `path`, checked against the pin.
fn load_at(path: &Path, pin: &Pin) -> Result<Published> {
    let (name, version, sha256) = (&pin.name, &pin.version, &pin.sha256);
    let (commit, path_in_vcs) = (&pin.commit, &pin.path_in_vcs);
    let published = read_archive(path, name, version)?;
    let (file, got) = (path.display(), &published.pin);
    let (got_sha256, got_commit, got_path) = (&got.sha256, &got.commit, &got.path_in_vcs);
    ensure!(
        got_sha256 == sha256,
        "{file} has sha256 {got_sha256}, but patches/upstream.toml pins {sha256}: delete that file \
         and run `cargo xtask fetch`; if the pin is what is wrong, `cargo xtask vendor --version \
         {version}` records the published crate again"
    );
    ensure!(
        got == pin,
        "{file} says it was published from commit {got_commit} in `{got_path}`, but \
         patches/upstream.toml says {commit} in `{path_in_vcs}`: run `cargo xtask vendor \
         --version {version}` to record it again"
    );
    Ok(published)
}

/// The pinned crate: from cargo's cache, or downloaded by cargo.
pub fn load_or_fetch(layout: &Layout, pin: &Pin) -> Result<Published> {
    load_at(&fetch(layout, &pin.name, &pin.version)?, pin)
}

/// Every pinned crate, from cargo's cache or downloaded by cargo.
pub fn load_all(layout: &Layout) -> Result<Vec<Published>> {
    let pins = crate::pin::read(&layout.pin())?;
    pins.iter().map(|pin| load_or_fetch(layout, pin)).collect()
}

/// Unpacks a `.crate` (a gzipped tar whose entries sit under `name-version/`).
pub fn read_archive(path: &Path, name: &str, version: &str) -> Result<Published> {
    let bytes = fs::read(path)?;
    unpack(&bytes, name, version).with_context(|| format!("in {}", path.display()))
}

pub fn unpack(bytes: &[u8], name: &str, version: &str) -> Result<Published> {
    let prefix = format!("{name}-{version}/");
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut files = Vec::new();
    for entry in archive.entries().context("not a gzipped tar archive")? {
        let mut entry = entry.context("not a gzipped tar archive")?;
        let kind = entry.header().entry_type();
        let path = entry.path()?.to_string_lossy().replace('\\', "/");
        if kind.is_dir() {
            continue;
        }
        ensure!(kind.is_file(), "`{path}` is not a plain file");
        let relative = path.strip_prefix(&prefix);
        let relative = relative.with_context(|| format!("`{path}` is outside `{prefix}`"))?;
        let plain = relative.split('/').all(|p| !p.is_empty() && p != "..");
        ensure!(plain, "`{path}` is not a plain relative path");
        let executable = entry.header().mode()? & 0o111 != 0;
        let mut data = Vec::new();
        entry.read_to_end(&mut data)?;
        files.push(CrateFile {
            path: relative.to_string(),
            data,
            executable,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let vcs_info = files
        .iter()
        .find(|f| f.path == ".cargo_vcs_info.json")
        .context("the crate has no .cargo_vcs_info.json, so its upstream commit is unknown")?;
    let VcsInfo { git, path_in_vcs } =
        serde_json::from_slice(&vcs_info.data).context("in .cargo_vcs_info.json")?;
    Ok(Published {
        pin: Pin {
            name: name.to_string(),
            version: version.to_string(),
            sha256: shared::sha256_hex(bytes),
            commit: git.sha1,
            path_in_vcs,
        },
        files,
    })
}

/// What `cargo package` records in `.cargo_vcs_info.json`: the commit it packaged, and the
/// crate's folder in the repository (absent for a crate at the root).
#[derive(serde::Deserialize)]
struct VcsInfo {
    git: VcsGit,
    #[serde(default)]
    path_in_vcs: String,
}

#[derive(serde::Deserialize)]
struct VcsGit {
    sha1: String,
}

/// The `.crate` of `name` `version` in cargo's cache, downloaded by cargo (with the user's
/// registry settings) if need be, through a throwaway package that depends on it exactly.
pub fn fetch(layout: &Layout, name: &str, version: &str) -> Result<PathBuf> {
    if let Some(path) = find_cached(name, version) {
        return Ok(path);
    }
    let dir = format!("xtask/fetch-{name}-{version}");
    let dir = layout.target().join(dir);
    let manifest = format!(
        "[package]\nname = \"xtask-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
         [dependencies]\n{name} = \"={version}\"\n\n[workspace]\n"
    );
    fs::create_dir_all(dir.join("src"))?;
    fs::write(dir.join("Cargo.toml"), manifest)?;
    fs::write(dir.join("src").join("lib.rs"), "")?;
    if let Ok(lock) = fs::read(layout.root.join("Cargo.lock")) {
        fs::write(dir.join("Cargo.lock"), lock)?;
    }
    eprintln!("fetching {name} {version} with cargo");
    let mut fetch = cmd::cargo();
    // Only the host's dependencies.
    fetch.args(["fetch", "--target", &cmd::host()?, "--manifest-path"]);
    let failed = format!("`cargo fetch` could not download {name} {version}");
    cmd::run_checked(fetch.arg(dir.join("Cargo.toml")), &failed)?;
    find_cached(name, version).with_context(|| {
        format!(
            "cargo fetched {name} {version}, but its .crate is not in the cache folders we know"
        )
    })
}

#[cfg(test)]
#[path = "../tests/private/published.rs"]
pub(crate) mod tests;
