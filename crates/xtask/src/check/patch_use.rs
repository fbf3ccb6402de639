//! Is `[patch.crates-io]` used? Cargo only warns when it is not, and then builds the published
//! crate in its place, so every test would quietly run on unpatched code.

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use cargo_metadata::Metadata;

use crate::cmd;

/// The crate graph of the workspace at `root` as cargo builds it there (with its
/// `.cargo/config.toml`) for this host, so that only the host's crates need be in cargo's cache.
/// Offline and `--locked`: reading it changes nothing.
pub fn resolve(root: &Path) -> Result<Metadata> {
    let host = cmd::host()?;
    let options = ["--locked", "--filter-platform", &host];
    let mut command = cmd::metadata_command(&root.join("Cargo.toml"), &options);
    let graph = command.current_dir(root).exec();
    graph.context("`cargo metadata --locked --offline --filter-platform <host>` failed")
}

/// Fails unless `graph` holds `name` once, built from `vendored` at `version`.
pub fn check(graph: &Metadata, name: &str, version: &str, vendored: &Path) -> Result<()> {
    let packages: Vec<_> = graph.packages.iter().filter(|p| p.name == name).collect();
    let shown = vendored.display();
    if let Some((registry, source)) = packages.iter().find_map(|p| Some((p, p.source.as_ref()?))) {
        bail!(
            "cargo builds {name} {} from {source}, not {shown}: [patch.crates-io] is unused (cargo \
             only warns) or some dependency asks for another version; make \
             [workspace.dependencies] ask for {version}",
            registry.version,
        );
    }
    let package = match packages[..] {
        [] => bail!("cargo builds no {name}: nothing in the workspace uses it on this host"),
        [package] => package,
        _ => bail!("cargo builds {name} {} times, not once", packages.len()),
    };
    let canonical = vendored.canonicalize();
    let canonical = canonical.with_context(|| format!("no folder {shown}"))?;
    let manifest = &package.manifest_path;
    let folder = manifest.parent().and_then(|p| p.canonicalize().ok());
    if folder != Some(canonical) {
        bail!("cargo builds {name} from {manifest}, not {shown}");
    }
    let found = package.version.to_string();
    ensure!(
        found == version,
        "cargo builds {name} {found}, but patches/upstream.toml pins {version}: run `cargo xtask \
         vendor`"
    );
    Ok(())
}
