//! candle-nn as the unpatched `generation` module of `crates/upstream` calls it. That crate
//! depends on this one under the name `candle_nn`: everything is the vendored candle-nn but
//! `sampling`, which is the published file (`src/published/`, written by `cargo xtask vendor`
//! and checked by `cargo xtask check`; never edit it). A patch that changes candle-nn's Gumbel
//! noise thus leaves the upstream side of every comparison as published.

pub use candle_nn::*;

#[path = "published/sampling.rs"]
pub mod sampling;
