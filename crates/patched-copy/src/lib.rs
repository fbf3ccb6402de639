//! The `generation` module with `patches/` applied: the same source as the vendored
//! candle-transformers, built the way `crates/upstream` builds the published module (a small
//! crate of its own). The benches compare these two, because the compiler inlines the same
//! code differently inside the whole of candle-transformers (a few percent of instructions in
//! top-p's sort), which would hide what the patches alone cost.
//!
//! `fixes` is the same module with the series' fixes only, the patches before its first speed
//! patch (`FIRST_SPEED_PATCH` in crates/xtask/src/project.rs): the benches' middle side.
//!
//! `src/generation/` and `src/fixes/` are written by `cargo xtask vendor` and checked by
//! `cargo xtask check`; never edit them.

pub mod fixes;
pub mod generation;
