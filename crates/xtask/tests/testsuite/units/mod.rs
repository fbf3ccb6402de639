//! The tests of single modules, through what each makes `pub`, in one binary.

mod apply;
mod mail;
mod notes;
mod record;
mod resolutions;
mod series;
mod stats;
mod summary;
mod trees;
