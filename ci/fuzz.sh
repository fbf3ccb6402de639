#!/usr/bin/env bash
# The fuzzer, a workspace of its own: formatted, linted, then run for a minute from the committed
# corpus, new inputs going to a scratch folder.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo_fuzz_version=0.13.2
cargo fuzz --version 2>/dev/null | grep -q "$cargo_fuzz_version" ||
  cargo install --locked cargo-fuzz --version "$cargo_fuzz_version"
manifest=crates/fuzz/Cargo.toml
cargo fmt --manifest-path "$manifest" -- --check
cargo clippy --locked --manifest-path "$manifest" --all-targets -- -D warnings
found=$(mktemp -d)
trap 'rm -rf "$found"' EXIT
cargo fuzz run --fuzz-dir crates/fuzz -s none sample "$found" crates/fuzz/corpus/sample -- \
  -max_len=16384 -max_total_time="${FUZZ_SECONDS:-60}"
