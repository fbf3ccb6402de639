//! The unit tests of `record`.

use anyhow::Result;
use git2::Oid;
use xtask::record::{read, write, Made, Record};

/// What `pr` made reads back as it was written, whatever a branch is named: git allows a `"` or
/// a `\` in a branch name, which the record's TOML must quote.
#[test]
fn the_record_reads_back_as_written() -> Result<()> {
    let temp = tempfile::tempdir()?;
    let repo = git2::Repository::init(temp.path())?;
    assert_eq!(read(&repo)?, Record::default());
    let tip = Oid::from_str("0123456789abcdef0123456789abcdef01234567")?;
    let mut record = Record::default();
    let made = Made {
        patch: Some("0001".into()),
        rewrite: Some("3496".into()),
        tip,
        written: Some(tip),
    };
    record.branches.insert("say-\"why\"\\now".into(), made);
    let series = Made {
        patch: None,
        rewrite: None,
        tip,
        written: None,
    };
    record.branches.insert("series".into(), series);
    write(&repo, &record)?;
    assert_eq!(read(&repo)?, record);
    let text = std::fs::read_to_string(xtask::record::path(&repo))?;
    assert!(text.starts_with("# Written by `cargo xtask pr`"), "{text}");
    Ok(())
}

/// The record is written whole through a temporary file, whose permissions are the owner's
/// alone: a new record gets a plain file's, and one written again keeps its own.
#[test]
fn the_record_keeps_a_plain_files_permissions() -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let temp = tempfile::tempdir()?;
    let repo = git2::Repository::init(temp.path())?;
    let mode = || -> Result<u32> {
        let metadata = std::fs::metadata(xtask::record::path(&repo))?;
        Ok(metadata.permissions().mode() & 0o777)
    };
    write(&repo, &Record::default())?;
    assert_eq!(mode()?, 0o644);
    let path = xtask::record::path(&repo);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640))?;
    write(&repo, &Record::default())?;
    assert_eq!(mode()?, 0o640);
    Ok(())
}
