//! The tests of single modules, through what each makes `pub`, in one binary.

#[path = "../common/mod.rs"]
mod common;
#[path = "../kept/mod.rs"]
mod kept;

mod mail;
mod merge;
mod notes;
mod resolutions;
mod series;
mod stats;
mod summary;
mod trees;
