//! The `generation` module of the published candle-transformers that `patches/upstream.toml`
//! pins, without the patches: tests and benches run it beside the patched crate in one process.
//! `src/generation/` and `published-tests/` are written by `cargo xtask vendor` and checked by
//! `cargo xtask check`; never edit them.

pub mod generation;
