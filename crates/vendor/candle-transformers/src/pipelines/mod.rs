pub mod text_generation;
