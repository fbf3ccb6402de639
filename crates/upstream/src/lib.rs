//! The `generation` module of the published candle-transformers that `patches/upstream.toml`
//! pins, without the patches: tests and benches run it beside the patched crate in one process.
//! `generation/` is written by `cargo xtask vendor` and checked by `cargo xtask check`; never
//! edit it.

pub mod generation;
