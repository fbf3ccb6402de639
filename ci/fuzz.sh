#!/usr/bin/env bash
# The fuzzer: crates/fuzz is a workspace of its own (cargo-fuzz builds it with coverage flags),
# so it is formatted, linted and built here, then run for a minute: it replays the committed
# corpus and explores from it. New inputs go to a scratch folder, so the corpus is not changed.
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
