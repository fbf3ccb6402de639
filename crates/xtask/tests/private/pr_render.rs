//! The unit tests of `pr/render`, a module of it.

use super::*;
use crate::pr::audit::Guard;

fn site(path: &str, guard: Guard) -> CallSite {
    CallSite {
        path: path.into(),
        line: 7,
        guard,
    }
}

#[test]
fn a_test_after_a_context_attribute_counts() {
    let patch = b"+++ b/tests/t.rs\n@@ -1,3 +1,6 @@\n }\n \n #[test]\n+fn added() {}\n+\n+#[test]\n+fn also_added() {}\n #[test]\n fn old() {}\n";
    assert_eq!(
        added_tests(patch),
        [(
            "tests/t.rs".to_string(),
            vec!["added".to_string(), "also_added".to_string()]
        )]
    );
}

#[test]
fn call_sites_are_counted_in_words() {
    let text = call_sites(&[
        site("a.rs", Guard::Itself),
        site("b.rs", Guard::Itself),
        site("c.rs", Guard::None),
    ]);
    assert!(text.starts_with(
        "Of the 3 calls of `LogitsProcessor::from_sampling` outside the module and its \
         tests, 2 map temperature <= 0 to `ArgMax` themselves and no longer need to; 1 \
         builds its `Sampling` with no such guard and now decodes greedily at temperature 0 \
         where it failed.\n\nWithout a guard:\n\n- `c.rs:7`\n"
    ));
    assert!(text.contains("<details><summary>The 2 calls that guard it themselves"));
    let text = call_sites(&[site("d.rs", Guard::Caller)]);
    assert!(
        text.contains("1 takes its `Sampling` from a caller and follows it."),
        "{text}"
    );
}
