//! The unit tests of `pr/verify`, a module of it.

use super::*;

#[test]
fn modules_are_read() {
    assert_eq!(
        module_of("candle-nn/src/sampling.rs", "candle-nn").as_deref(),
        Some("sampling::")
    );
    assert_eq!(
        module_of(
            "candle-transformers/src/generation/mod.rs",
            "candle-transformers"
        )
        .as_deref(),
        Some("generation::")
    );
    assert_eq!(
        module_of(
            "candle-transformers/tests/generation_tests.rs",
            "candle-transformers"
        ),
        None
    );
}
