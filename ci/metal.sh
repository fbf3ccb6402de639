#!/usr/bin/env bash
# Metal, type-checked (not linked or run) by clippy for aarch64-apple-darwin; installs the target
# and clang, which compiles the one C file criterion's `alloca` needs.
set -euo pipefail
cd "$(dirname "$0")/.."

target=aarch64-apple-darwin
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
if ! command -v clang >/dev/null || ! command -v pkg-config >/dev/null; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "the Metal check needs clang and pkg-config: install them (apt-get install clang pkg-config)" >&2
    exit 1
  fi
  apt-get update -qq
  apt-get install -y -qq clang pkg-config >/dev/null
fi
cargo xtask metal-check
