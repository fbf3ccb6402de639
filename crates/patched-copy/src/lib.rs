//! The `generation` module with `patches/` applied: the same source as the vendored
//! candle-transformers, built the way `crates/upstream` builds the published module (a small
//! crate of its own). The benches compare these two, because the compiler inlines the same
//! code differently inside the whole of candle-transformers (a few percent of instructions in
//! top-p's sort), which would hide what the patches alone cost.
//!
//! `src/generation/` is written by `cargo xtask vendor` and checked by `cargo xtask check`;
//! never edit it.

pub mod generation;
