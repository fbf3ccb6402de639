//! Reading a published `.crate`: its files, and its upstream commit and folder from
//! `.cargo_vcs_info.json`, from archives made as `cargo package` makes them.

use crate::common::{file, pack};
use anyhow::Result;
use xtask::published;

#[test]
fn unpack_reads_files_and_vcs_info() -> Result<()> {
    let vcs = r#"{
  "git": {
    "sha1": "59f8e903ca80a32ea7f8514b39748fc979e69e82"
  },
  "path_in_vcs": "candle-transformers"
}"#;
    let files = vec![
        file(".cargo_vcs_info.json", vcs),
        file("src/lib.rs", "//! x\n"),
    ];
    let bytes = pack("demo", "0.1.0", &files)?;
    let published = published::unpack(&bytes, "demo", "0.1.0")?;
    assert_eq!(published.files, files);
    assert_eq!(
        published.pin.commit,
        "59f8e903ca80a32ea7f8514b39748fc979e69e82"
    );
    assert_eq!(published.pin.path_in_vcs, "candle-transformers");
    assert_eq!(published.pin.sha256, shared::sha256_hex(&bytes));
    Ok(())
}

#[test]
fn unpack_refuses_paths_outside_the_crate() -> Result<()> {
    let bytes = pack("other", "0.1.0", &[file("src/lib.rs", "")])?;
    let err = published::unpack(&bytes, "demo", "0.1.0")
        .unwrap_err()
        .to_string();
    assert_eq!(err, "`other-0.1.0/src/lib.rs` is outside `demo-0.1.0/`");
    Ok(())
}
