//! The unit tests of `series/notes`.

use anyhow::Result;
use xtask::series::notes::*;

#[test]
fn notes_split_at_the_test_plan_and_find_markers() -> Result<()> {
    let notes = parse(
        "## For users\n\nGreedy now.\n<!-- call-sites -->\n\n## Test plan\n\n<!-- real-model -->\nMore.\n",
    )?;
    assert_eq!(
        notes.sections,
        [
            Part::Text("## For users\n\nGreedy now.".into()),
            Part::CallSites
        ]
    );
    assert_eq!(
        notes.test_plan,
        [Part::RealModel, Part::Text("More.".into())]
    );
    let err = parse("<!-- benches -->\n").unwrap_err().to_string();
    assert!(
        err.starts_with("`<!-- benches -->` is not a marker"),
        "{err}"
    );
    let err = parse("## Test plan\n## Test plan\n")
        .unwrap_err()
        .to_string();
    assert_eq!(err, "`## Test plan` appears twice");
    Ok(())
}
