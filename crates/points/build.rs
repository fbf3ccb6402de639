//! Writes `points.rs` into `OUT_DIR`: one module per folder of `crates/vendor/points` (what
//! `cargo xtask vendor` writes), each the point's `generation` module, and the `points!` call
//! that lists them. A point's `generation` module calls candle-nn by its paths
//! `candle_nn::sampling` and `candle_nn::ops`. Where the point holds its own `nn/sampling.rs` and
//! `nn/ops.rs`, a module `candle_nn` inside the point's module shadows the crate with one whose
//! `sampling` and `ops` are the point's files and everything else candle-nn's. That is why the
//! source is written out here rather than reached with `#[path]`: the shadowing module must sit
//! beside the code, and the code's inner doc comment (`//!`), which cannot follow another item,
//! is left out.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../vendor/points");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| {
            panic!(
                "cannot read {}: {err}: run `cargo xtask vendor`",
                dir.display()
            )
        })
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut out = String::new();
    let mut list = Vec::new();
    for name in &names {
        let point = dir.join(name);
        // A module name cannot start with a digit: `0001` -> `p0001`.
        let module = match name.starts_with(|c: char| c.is_ascii_digit()) {
            true => format!("p{name}"),
            false => name.clone(),
        };
        let generation: String = read(&point.join("generation/mod.rs"))
            .lines()
            .skip_while(|line| line.starts_with("//!"))
            .map(|line| format!("{line}\n"))
            .collect();
        let mut shadow = String::new();
        for module in ["sampling", "ops"] {
            let file = point.join(format!("nn/{module}.rs"));
            if file.is_file() {
                let _ = write!(shadow, "    pub mod {module} {{\n{}\n    }}\n", read(&file));
            }
        }
        if !shadow.is_empty() {
            // candle-nn's code is written for candle-nn's features, which this crate lacks, and
            // the benches call only some of it.
            shadow = format!(
                "#[allow(dead_code, unexpected_cfgs, unused_imports)]\nmod candle_nn {{\n    pub use ::candle_nn::*;\n{shadow}}}\n"
            );
        }
        let _ = write!(
            out,
            "/// The point `{name}` (crates/vendor/points/{name}).\n#[allow(clippy::all)]\npub mod {module} {{\n    pub mod generation {{\n{shadow}{generation}\n    }}\n}}\n\n"
        );
        list.push(format!("{name:?} => {module}"));
    }
    let _ = writeln!(out, "points!({});", list.join(", "));
    let target =
        Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("points.rs");
    std::fs::write(&target, out)
        .unwrap_or_else(|err| panic!("cannot write {}: {err}", target.display()));
}

fn read(path: &Path) -> String {
    println!("cargo::rerun-if-changed={}", path.display());
    std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}
