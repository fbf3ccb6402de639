pub(crate) mod sampling;
