use super::*;
use crate::pin::Pin;
use crate::published::tests::file;
use crate::trees::tree_of_crates;

fn krate(path_in_vcs: &str) -> Published {
    Published {
        pin: Pin {
            name: "demo".into(),
            version: "0.1.0".into(),
            sha256: String::new(),
            commit: String::new(),
            path_in_vcs: path_in_vcs.into(),
        },
        files: Vec::new(),
    }
}

#[test]
fn a_part_of_a_prefixed_tree_is_the_part_of_the_unprefixed_tree() -> Result<()> {
    let scratch = crate::trees::scratch()?;
    let files = [file("src/lib.rs", "")];
    let prefixed = tree_of_crates(&scratch, &[("candle-transformers", &files[..])])?;
    let plain = tree_of_crates(&scratch, &[("", &files[..])])?;
    let part = |path| part(&scratch, &krate("candle-transformers"), prefixed, path);
    assert_eq!(part("")?, plain);
    assert_eq!(
        part("src")?,
        tree_of_crates(&scratch, &[("", &[file("lib.rs", "")][..])])?
    );
    assert!(part("missing").is_err());
    Ok(())
}

#[test]
fn a_part_that_is_a_file_is_a_folder_of_it_alone() -> Result<()> {
    let scratch = crate::trees::scratch()?;
    let tree = tree_of_crates(
        &scratch,
        &[(
            "",
            &[file("a.rs", "a"), file("b.rs", "b"), file("c/d.rs", "")][..],
        )],
    )?;
    let only = part(&scratch, &krate(""), tree, "b.rs")?;
    assert_eq!(
        only,
        tree_of_crates(&scratch, &[("", &[file("b.rs", "b")][..])])?
    );
    assert!(part(&scratch, &krate(""), tree, "missing.rs").is_err());
    Ok(())
}
