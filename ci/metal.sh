#!/usr/bin/env bash
# Metal, type-checked for Apple's target: clippy with `--features metal` for aarch64-apple-darwin
# over every workspace crate that has the feature, and so over the vendored candle crates they
# build. Nothing is linked or run. Installs what a fresh machine lacks: the target's standard
# library and clang (which compiles, for that target, the one C file criterion's `alloca` needs).
set -euo pipefail
cd "$(dirname "$0")/.."

target=aarch64-apple-darwin
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
if ! command -v clang >/dev/null || ! command -v pkg-config >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq clang pkg-config >/dev/null
  else
    echo "the Metal check needs clang and pkg-config: install them (apt-get install clang pkg-config)" >&2
    exit 1
  fi
fi
cargo xtask metal-check
