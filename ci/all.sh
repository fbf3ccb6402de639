#!/usr/bin/env bash
# Every CI step in order; each script can also be run alone from the workspace root.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/lib.sh

# A cold build gains nothing from incremental compilation, which only adds its bookkeeping.
export CARGO_INCREMENTAL=0

for name in setup lint check test bench metal; do
  step "$name" bash "ci/$name.sh"
done
# Not ci/fuzz.sh: cargo-fuzz's optimised, instrumented build of candle takes 11 to 13 minutes
# from cold on 2 cores, which a 25-minute run cannot hold. `cargo test` replays the corpus, lint
# formats the target, and `cargo xtask check` keeps its lock file current; run it locally.
summary
