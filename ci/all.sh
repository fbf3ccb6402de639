#!/usr/bin/env bash
# The CI steps, each timed and named, and a summary printed even when a step fails: all of them
# in order, or those named (`bash ci/all.sh lint test`), from the workspace root.
set -euo pipefail
cd "$(dirname "$0")/.."

# A cold build gains nothing from incremental compilation, which only adds its bookkeeping.
export CARGO_INCREMENTAL=0

# What a fresh machine lacks: rustfmt and clippy, the pinned crate in cargo's cache (`cargo xtask
# check` works offline from it), and the model for the real-model path.
ci_setup() {
  for component in rustfmt clippy; do
    cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1 || rustup component add "$component"
  done
  cargo xtask fetch
  bash ci/fetch-model.sh
}

# Formatting and clippy, as upstream runs them, over every target of the workspace.
ci_lint() {
  cargo fmt --all -- --check
  # The fuzzer is a workspace of its own; `bash ci/fuzz.sh` lints and runs it.
  cargo fmt --manifest-path crates/fuzz/Cargo.toml -- --check
  cargo clippy --locked --workspace --all-targets -- -D warnings
}

# The vendored tree is exactly published crate + patches/, and cargo really uses it (an unused
# [patch] is only a warning to cargo, and would test the unpatched crate).
ci_check() { cargo xtask check; }

# The README's commands, on the real model: the model is on disk (setup), and its tests must not
# skip.
ci_test() {
  REPRO_REQUIRE_MODEL=1 cargo test --locked
  REPRO_REQUIRE_MODEL=1 cargo repro --generate 16
}

# Every bench runs once, untimed, in criterion's test mode on the tests' dev build (measuring
# stays local: `cargo bench`, then `cargo xtask bench-report --callgrind`). By target name, not
# `-p benches`: cargo then resolves features over the workspace, as `cargo test` just did, and
# reuses its build of candle.
ci_bench() { cargo test --locked --bench bench_main; }

# Metal, type-checked (not linked or run) by clippy for aarch64-apple-darwin: adds the rustup
# target, and as root with apt-get installs what is missing of clang (it compiles the one C file
# criterion's `alloca` needs) and pkg-config; `metal-check` names whatever is still missing.
ci_metal() {
  local target=aarch64-apple-darwin
  rustup target list --installed | grep -qx "$target" || rustup target add "$target"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null &&
    ! { command -v clang && command -v pkg-config; } >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq clang pkg-config >/dev/null
  fi
  cargo xtask metal-check
}

results=()
summary() { echo "::: done in ${SECONDS}s: ${results[*]}"; }

# Not fuzz: cargo-fuzz's optimised, instrumented build of candle takes 11 to 13 minutes from cold
# on 2 cores, which a 25-minute run cannot hold. `cargo test` replays the corpus, lint formats the
# target, and `cargo xtask fetch` (setup) fails on a stale lock file; run `bash ci/fuzz.sh` locally.
steps=${*:-setup lint check test bench metal}
for name in $steps; do
  declare -F "ci_$name" >/dev/null || { echo "no CI step named $name" >&2; exit 2; }
done
for name in $steps; do
  started=$SECONDS status=0
  echo "::: $name: bash ci/all.sh $name"
  # Run as `ci_x || status=$?`, a step would ignore `set -e`; so errexit goes off here, and back
  # on in the step's subshell, which stops at its first failing command.
  set +e
  (set -e; "ci_$name")
  status=$?
  set -e
  took=$((SECONDS - started))
  if [ "$status" -ne 0 ]; then
    results+=("$name FAILED (exit $status) ${took}s")
    echo "::: $name: FAILED with exit $status after ${took}s"
    summary
    exit "$status"
  fi
  results+=("$name ${took}s")
  echo "::: $name: ok in ${took}s"
done
summary
