//! The unit tests of `series`.

use anyhow::Result;
use fs_err as fs;
use xtask::series::*;

#[test]
fn file_name_follows_git_format_patch() {
    assert_eq!(
        file_name(1, "generation: Sample greedily at temperature 0"),
        "0001-generation-Sample-greedily-at-temperature-0.patch"
    );
    // Names that git 2.47 `format-patch` gave these subjects.
    assert_eq!(
        file_name(
            1,
            "Treat a zero temperature as greedy in LogitsProcessor::from_sampling"
        ),
        "0001-Treat-a-zero-temperature-as-greedy-in-LogitsProcesso.patch"
    );
    assert_eq!(file_name(2, "..Fix...it.."), "0002-.Fix.it.patch");
}

#[test]
fn an_email_keeps_the_authors_offset_for_git_am() -> Result<()> {
    let repo = &xtask::trees::scratch()?;
    let tree = repo.find_tree(repo.treebuilder(None)?.write()?)?;
    for offset in [-210, -30, -60, 0, 330] {
        let time = git2::Time::new(1_795_993_288, offset);
        let me = git2::Signature::new("Zoë", "zoe@example.com", &time)?;
        let id = repo.commit(
            None,
            &me,
            &me,
            "generation: A subject\n\nA body.\n",
            &tree,
            &[],
        )?;
        let message = parse_message(&email(&repo.find_commit(id)?)?)?;
        assert_eq!(message.time, (1_795_993_288, offset));
        assert_eq!(message.subject, "generation: A subject");
    }
    Ok(())
}

#[test]
fn load_refuses_unnumbered_and_duplicate_patches() -> Result<()> {
    let temp = tempfile::tempdir()?;
    fs::write(temp.path().join("upstream.toml"), "")?;
    // Each a mail whose message parses, as `Series::load` requires.
    let mail =
        "From: A <a@b.c>\nDate: Thu, 1 Jan 1970 00:00:00 +0000\nSubject: [PATCH] a\n\nBody.\n";
    fs::write(temp.path().join("0002-b.patch"), mail)?;
    fs::write(temp.path().join("0001-a.patch"), mail)?;
    let names: Vec<String> = Series::load(temp.path())?
        .patches
        .into_iter()
        .map(|p| p.file_name)
        .collect();
    assert_eq!(names, ["0001-a.patch", "0002-b.patch"]);
    fs::write(temp.path().join("0001-again.patch"), "")?;
    let err = Series::load(temp.path()).unwrap_err().to_string();
    assert_eq!(err, "0001-a.patch and 0001-again.patch share a number");
    fs::remove_file(temp.path().join("0001-again.patch"))?;
    fs::write(temp.path().join("fix.patch"), "")?;
    let err = Series::load(temp.path()).unwrap_err().to_string();
    assert!(
        err.starts_with("fix.patch: a patch's name must start"),
        "{err}"
    );
    Ok(())
}

#[test]
fn index_lines_name_new_and_deleted_files_too() {
    let bytes = "\
diff --git a/kept.rs b/kept.rs
index 1111111..2222222 100644
--- a/kept.rs
+++ b/kept.rs
diff --git a/added.rs b/added.rs
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/added.rs
diff --git a/gone.rs b/gone.rs
deleted file mode 100644
index 4444444..0000000
--- a/gone.rs
+++ /dev/null
";
    let patch = Patch {
        file_name: "0001-a.patch".to_string(),
        bytes: bytes.as_bytes().to_vec(),
        message: Default::default(),
    };
    let lines: Vec<(String, String, String)> = patch
        .index_lines()
        .into_iter()
        .map(|l| (l.path, l.before, l.after))
        .collect();
    let line = |p: &str, b: &str, a: &str| (p.to_string(), b.to_string(), a.to_string());
    assert_eq!(
        lines,
        [
            line("kept.rs", "1111111", "2222222"),
            line("added.rs", "0000000", "3333333"),
            line("gone.rs", "4444444", "0000000"),
        ]
    );
}
