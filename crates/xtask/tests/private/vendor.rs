#[test]
fn patch_entries_go_after_the_last_entry_and_into_exclude() -> anyhow::Result<()> {
    let manifest = "[workspace]\nexclude = [\"crates/fuzz\", \"target\"]\n\n[patch.crates-io]\na = { path = \"crates/vendor/a\" }\n\n# Next.\n[profile.dev]\n";
    assert_eq!(
        super::patch_entries(manifest, &["a", "b"], "crates/vendor/")?,
        "[workspace]\nexclude = [\"crates/fuzz\", \"target\", \"crates/vendor\"]\n\n[patch.crates-io]\na = { path = \"crates/vendor/a\" }\nb = { path = \"crates/vendor/b\" }\n\n# Next.\n[profile.dev]\n"
    );
    assert_eq!(
        super::patch_entries("[package]\nname = \"fuzz\"\n", &["a"], "../vendor/")?,
        "[package]\nname = \"fuzz\"\n\n[patch.crates-io]\na = { path = \"../vendor/a\" }\n"
    );
    let (moved, count) = super::set_versions(
        "[workspace.dependencies]\ncandle = { package = \"candle-core\", version = \"0.11.1\" }\ncandle-nn = \"0.11.1\" # pinned\nrand = \"0.11.1\"\n",
        "0.11.1",
        "0.11.2",
    )?;
    assert_eq!(
        (moved.as_str(), count),
        (
            "[workspace.dependencies]\ncandle = { package = \"candle-core\", version = \"0.11.2\" }\ncandle-nn = \"0.11.2\" # pinned\nrand = \"0.11.1\"\n",
            2
        )
    );
    Ok(())
}
