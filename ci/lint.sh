#!/usr/bin/env bash
# Formatting and clippy, as upstream runs them, over every target of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo fmt --all -- --check
# The fuzzer is a workspace of its own; `bash ci/fuzz.sh` lints and runs it.
cargo fmt --manifest-path crates/fuzz/Cargo.toml -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
