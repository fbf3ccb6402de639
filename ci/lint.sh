#!/usr/bin/env bash
# Formatting and clippy, as upstream runs them, over every target of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
