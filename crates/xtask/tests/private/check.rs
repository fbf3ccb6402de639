use super::*;

#[test]
fn a_generated_folder_outside_the_generated_root_is_reported() {
    assert_eq!(
        not_in_root("crates/points").as_deref(),
        Some("crates/points is generated but not under crates/vendor")
    );
    assert!(not_in_root("crates/vendor/a/b").is_some());
    let dirs = [
        project::POINTS_DIR.to_string(),
        project::vendored_dir("candle-nn"),
    ];
    assert!(dirs.iter().all(|dir| not_in_root(dir).is_none()));
}
