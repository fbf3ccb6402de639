//! `cargo xtask vendor` and `check` on a fixture crate archive.

use crate::kept;

use crate::common::*;
use anyhow::Result;
use xtask::vendor;

const PATCH_NAME: &str = "0001-generation-Raise-the-greedy-threshold.patch";
const SUBJECT: &str = "generation: Raise the greedy threshold\n\nA test patch.";

#[test]
fn vendor_writes_published_crate_plus_patches_and_check_passes() -> Result<()> {
    let ws = workspace()?;
    let patch = make_patch(&crate_files(), SUBJECT, raise_threshold)?;
    ws.add_patch(PATCH_NAME, &patch)?;

    crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published))?;

    let root = &ws.layout.root;
    let patched = std::fs::read_to_string(
        root.join("crates/vendor/candle-transformers/src/generation/mod.rs"),
    )?;
    assert!(patched.contains(NEW_LINE) && !patched.contains(OLD_LINE));
    let unpatched = std::fs::read(root.join("crates/vendor/points/published/generation/mod.rs"))?;
    assert_eq!(unpatched, published_generation());
    assert_eq!(
        std::fs::read(root.join("crates/vendor/candle-transformers/Cargo.toml"))?,
        crate_files()[1].data
    );
    // Nothing else is left beside the generated folders.
    let mut crates: Vec<String> = std::fs::read_dir(root.join("crates"))?
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    assert_eq!(crates, ["vendor"]);
    let mut generated: Vec<String> = std::fs::read_dir(root.join("crates/vendor"))?
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    generated.sort();
    assert_eq!(
        generated,
        ["candle-transformers", "points", "published-tests"]
    );
    // The benches' points: the published module, its control (the same code again), the
    // patch's branch and the whole series.
    let points = root.join("crates/vendor/points");
    let mut names: Vec<String> = std::fs::read_dir(&points)?
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["0001", "GENERATED.md", "control", "published", "series"]
    );
    let point = |name: &str| std::fs::read(points.join(name).join("generation/mod.rs"));
    assert_eq!(point("published")?, published_generation());
    assert_eq!(point("control")?, published_generation());
    assert_eq!(point("0001")?, patched.as_bytes());
    assert_eq!(point("series")?, patched.as_bytes());
    let current = crate::common::check_generated(&ws.layout, std::slice::from_ref(&ws.published))?;
    let folders: Vec<&str> = current
        .iter()
        .filter_map(|proved| match proved {
            xtask::check::Proved::Current { dir, .. } => Some(dir.as_str()),
            _ => None,
        })
        .collect();
    let points = "crates/vendor/points";
    let generated = [
        "crates/vendor/candle-transformers",
        "crates/vendor/published-tests",
        points,
    ];
    assert_eq!(folders, generated, "{current:?}");
    let said = current[0].to_string();
    let crate_folder = "crates/vendor/candle-transformers is candle-transformers 0.11.1 + patches/";
    assert!(
        said.starts_with(&format!("{crate_folder} (tree ")),
        "{said}"
    );
    Ok(())
}

#[test]
fn each_point_holds_what_its_patchs_branch_holds() -> Result<()> {
    let ws = workspace()?;
    let module = "candle-transformers/src/generation/mod.rs";
    let series = make_series(
        &crate_files(),
        vec![
            ("generation: Raise the threshold", Box::new(raise_threshold)),
            (
                "generation: Name the seed",
                Box::new(move |root: &std::path::Path| {
                    edit(
                        root,
                        module,
                        "pub fn new(seed: u64",
                        "pub fn new(the_seed: u64",
                    )
                }),
            ),
            (
                "generation: Raise it again",
                Box::new(move |root: &std::path::Path| edit(root, module, "1e-6", "1e-5")),
            ),
        ],
    )?;
    for (i, (subject, patch)) in series.iter().enumerate() {
        let name = xtask::series::file_name(i + 1, subject);
        ws.add_patch(&name, patch)?;
    }
    // 0003 builds on 0001; 0002 stands alone on the published crate.
    std::fs::write(
        ws.layout.patches().join("stack.toml"),
        "[builds-on]\n\"0003\" = \"0001\"\n",
    )?;
    crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published))?;
    let point = |name: &str| {
        std::fs::read_to_string(
            ws.layout
                .root
                .join("crates/vendor/points")
                .join(name)
                .join("generation/mod.rs"),
        )
    };
    let has = |text: &str, threshold: &str, seed: &str| {
        text.contains(&format!("if v < {threshold} {{ None }}"))
            && text.contains(&format!("pub fn new({seed}: u64"))
    };
    assert!(has(&point("0001")?, "1e-6", "seed"));
    assert!(has(&point("0002")?, "1e-7", "the_seed"));
    assert!(has(&point("0003")?, "1e-5", "seed"));
    assert!(has(&point("series")?, "1e-5", "the_seed"));
    crate::common::check_generated(&ws.layout, std::slice::from_ref(&ws.published))?;
    // A point edited by hand is found, with the command that fixes it.
    let edited = ws
        .layout
        .root
        .join("crates/vendor/points/0002/generation/mod.rs");
    std::fs::write(&edited, point("0002")?.replace("the_seed", "seed"))?;
    let err = crate::common::check_generated(&ws.layout, std::slice::from_ref(&ws.published))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("crates/vendor/points differs from the points of ")
            && err.contains("modified 0002/generation/mod.rs")
            && err.contains("run `cargo xtask vendor`"),
        "{err}"
    );
    Ok(())
}

#[test]
fn vendor_replaces_what_was_there() -> Result<()> {
    let ws = workspace()?;
    crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published))?;
    let stray = ws
        .layout
        .root
        .join("crates/vendor/candle-transformers/src/stray.rs");
    std::fs::write(&stray, "// left over\n")?;
    crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published))?;
    assert!(!stray.exists());
    crate::common::check_generated(&ws.layout, std::slice::from_ref(&ws.published))?;
    Ok(())
}

#[test]
fn a_patch_that_does_not_apply_names_the_hunk_and_overwrites_nothing() -> Result<()> {
    let ws = workspace()?;
    crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published))?;
    let crates = ws.layout.root.join("crates");
    let before = snapshot(&crates);

    // A patch written against a file whose line above the change differs from the published one.
    let mut other_base = crate_files();
    let text = String::from_utf8(published_generation())?;
    other_base[2].data = text
        .replacen(
            "let temperature = temperature.and_then",
            "let temperature = temperature.and_then_some",
            1,
        )
        .into_bytes();
    let patch = make_patch(&other_base, SUBJECT, raise_threshold)?;
    ws.add_patch(PATCH_NAME, &patch)?;

    let err = format!(
        "{:#}",
        crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published)).unwrap_err()
    );
    assert!(
        err.starts_with(
            "patching candle-transformers 0.11.1: 0001-generation-Raise-the-greedy-threshold.patch \
             does not apply: candle-transformers/src/generation/mod.rs: hunk 1 (@@ -"
        ),
        "{err}"
    );
    // What the hunk expected, and what the file has there, the first line that differs marked
    // on both sides, and how to redo the patch.
    assert!(err.contains("differs first at line "), "{err}");
    assert!(
        err.contains("\n    >         let temperature = temperature.and_then_some(|v|"),
        "{err}"
    );
    assert!(err.contains("but the file has:"), "{err}");
    assert!(
        err.contains("\n    >         let temperature = temperature.and_then(|v|"),
        "{err}"
    );
    assert_eq!(err.matches("\n    > ").count(), 2, "{err}");
    assert!(err.ends_with(xtask::apply::REDO), "{err}");
    assert_eq!(snapshot(&crates), before);
    Ok(())
}

#[test]
fn a_patch_for_a_missing_file_says_so() -> Result<()> {
    let ws = workspace()?;
    let mut base = crate_files();
    base.push(file("src/extra.rs", "// extra\n"));
    let patch = make_patch(&base, SUBJECT, |root| {
        edit(
            root,
            "candle-transformers/src/extra.rs",
            "// extra",
            "// changed",
        )
    })?;
    ws.add_patch("0001-extra.patch", &patch)?;
    let err = format!(
        "{:#}",
        crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published)).unwrap_err()
    );
    assert_eq!(
        err,
        format!(
            "patching candle-transformers 0.11.1: 0001-extra.patch does not apply: \
             candle-transformers/src/extra.rs does not exist\n{}",
            xtask::apply::REDO
        )
    );
    assert!(!ws
        .layout
        .root
        .join("crates")
        .join("candle-transformers")
        .exists());
    Ok(())
}

#[test]
fn check_fails_on_a_tampered_tree_with_the_command_that_fixes_it() -> Result<()> {
    let ws = workspace()?;
    crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published))?;
    let vendored = ws.layout.root.join("crates/vendor/candle-transformers");
    std::fs::write(
        vendored.join("src/lib.rs"),
        "pub mod generation;\n// hand edit\n",
    )?;
    std::fs::write(vendored.join("src/new.rs"), "")?;
    std::fs::remove_file(vendored.join("Cargo.toml"))?;
    let upstream_copy = ws
        .layout
        .root
        .join("crates/vendor/points/published/generation/mod.rs");
    std::fs::write(&upstream_copy, "// not the published module\n")?;

    let err = crate::common::check_generated(&ws.layout, std::slice::from_ref(&ws.published))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "crates/vendor/candle-transformers differs from candle-transformers 0.11.1 + patches/:\n    \
         deleted Cargo.toml\n    \
         modified src/lib.rs\n    \
         added src/new.rs\n\
         crates/vendor/points differs from the points of candle-transformers 0.11.1 and \
         patches/stack.toml:\n    \
         modified published/generation/mod.rs\n\
         run `cargo xtask vendor` to regenerate them; a change made there by hand belongs in a \
         patch (README: \"After review comments\")"
    );
    crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published))?;
    crate::common::check_generated(&ws.layout, std::slice::from_ref(&ws.published))?;
    Ok(())
}

#[test]
fn check_holds_the_generated_root_to_what_vendor_writes_and_marks() -> Result<()> {
    let ws = workspace()?;
    crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published))?;
    let root = &ws.layout.root;
    assert_eq!(
        std::fs::read_to_string(root.join(".gitattributes"))?,
        "crates/vendor/** linguist-generated=true\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("crates/vendor/published-tests/GENERATED.md"))?,
        "# Generated by `cargo xtask vendor`: never edit\n\ncrates/vendor/published-tests is \
         candle-transformers 0.11.1 as published.\n\n`cargo xtask check` fails unless this \
         folder is exactly that. To change it, change `patches/` and run `cargo xtask vendor`.\n"
    );
    crate::common::check_generated(&ws.layout, std::slice::from_ref(&ws.published))?;

    std::fs::create_dir(root.join("crates/vendor/notes"))?;
    std::fs::write(
        root.join(".gitattributes"),
        "crates/vendor/** linguist-generated=true\ncrates/xtask/** linguist-generated\n",
    )?;
    std::fs::remove_file(root.join("crates/vendor/published-tests/GENERATED.md"))?;
    let err = crate::common::check_generated(&ws.layout, std::slice::from_ref(&ws.published))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "crates/vendor/notes is under crates/vendor, which holds only what `cargo xtask vendor` \
         writes: move it out or delete it\n\
         .gitattributes marks [\"crates/vendor/** linguist-generated=true\", \"crates/xtask/** \
         linguist-generated\"] generated, not exactly `crates/vendor/** linguist-generated=true`\n\
         crates/vendor/published-tests differs from candle-transformers 0.11.1 as published:\n    \
         deleted GENERATED.md\n\
         run `cargo xtask vendor` to regenerate them; a change made there by hand belongs in a \
         patch (README: \"After review comments\")"
    );
    Ok(())
}

#[test]
fn check_fails_when_a_generated_folder_is_missing() -> Result<()> {
    let ws = workspace()?;
    let err = crate::common::check_generated(&ws.layout, std::slice::from_ref(&ws.published))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        ".gitattributes marks [] generated, not exactly `crates/vendor/** linguist-generated=true`\n\
         crates/vendor/candle-transformers is missing\n\
         crates/vendor/published-tests is missing\n\
         crates/vendor/points is missing\n\
         run `cargo xtask vendor` to regenerate them; a change made there by hand belongs in a \
         patch (README: \"After review comments\")"
    );
    Ok(())
}

/// The fixture crate as if published again as `version`, with `change` made to its files.
fn republished(
    version: &str,
    change: impl Fn(&mut Vec<xtask::published::CrateFile>),
) -> Result<xtask::published::Published> {
    let mut files = crate_files();
    files[1] = file(
        "Cargo.toml",
        format!("[package]\nname = \"candle-transformers\"\nversion = \"{version}\"\n"),
    );
    change(&mut files);
    let bytes = pack("candle-transformers", version, &files)?;
    xtask::published::unpack(&bytes, "candle-transformers", version)
}

#[test]
fn moving_to_another_release_repins_everything_or_nothing() -> Result<()> {
    let ws = workspace()?;
    // The workspace's own manifest, as `vendor --version` finds it.
    let manifest = xtask::project::Layout::workspace().root.join("Cargo.toml");
    std::fs::copy(&manifest, ws.layout.root.join("Cargo.toml"))?;
    let patch = make_patch(&crate_files(), SUBJECT, raise_threshold)?;
    ws.add_patch(PATCH_NAME, &patch)?;
    crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published))?;
    let old = ws.published.pin.clone();
    let read = |path: &str| std::fs::read_to_string(ws.layout.root.join(path));
    assert!(read("Cargo.toml")?.contains(&format!("\"{}\"", old.version)));

    // A release where the patched line moved: nothing is written, and the hunk is named.
    let moved = republished("0.11.2", |files| {
        let module = &mut files[2].data;
        *module = String::from_utf8_lossy(module)
            .replace(OLD_LINE, "if v < 1e-7 { None } else { Some(v * 1.0) }")
            .into_bytes();
    })?;
    let before = snapshot(&ws.layout.root);
    let err = format!(
        "{:#}",
        crate::common::vendor(&ws.layout, std::slice::from_ref(&moved)).unwrap_err()
    );
    assert!(
        err.contains(&format!("{PATCH_NAME} does not apply")),
        "{err}"
    );
    assert!(
        err.contains("candle-transformers/src/generation/mod.rs: hunk"),
        "{err}"
    );
    assert!(snapshot(&ws.layout.root) == before, "the workspace changed");

    // A release the patch applies to: the trees, the pin and every candle version move.
    let next = republished("0.11.2", |_| {})?;
    vendor::update(
        &ws.layout,
        &[xtask::pin::Line::Pinned(old.clone())],
        Some(std::slice::from_ref(&ws.published)),
        std::slice::from_ref(&next),
    )?;
    let cargo_toml = read("Cargo.toml")?;
    assert!(
        !cargo_toml.contains(&format!("\"{}\"", old.version)),
        "{cargo_toml}"
    );
    assert_eq!(cargo_toml.matches("\"0.11.2\"").count(), 3, "{cargo_toml}");
    assert_eq!(
        xtask::pin::read(&ws.layout.pin())?,
        std::slice::from_ref(&next.pin)
    );
    crate::common::check_generated(&ws.layout, std::slice::from_ref(&next))?;
    Ok(())
}

#[test]
fn a_move_that_cannot_repin_writes_nothing() -> Result<()> {
    let ws = workspace()?;
    let manifest = xtask::project::Layout::workspace().root.join("Cargo.toml");
    std::fs::copy(&manifest, ws.layout.root.join("Cargo.toml"))?;
    // The release moves the patched line down: the patch is written again on it.
    let patch = make_patch(&crate_files(), SUBJECT, raise_threshold)?;
    ws.add_patch(PATCH_NAME, &patch)?;
    crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published))?;
    commit_all(&git2::Repository::init(&ws.layout.root)?, "series")?;
    let next = republished("0.11.2", |files| {
        let module = String::from_utf8_lossy(&files[2].data).into_owned();
        files[2].data = format!("//! 0.11.2\n{module}").into_bytes();
    })?;
    let fuzz = ws.layout.root.join(xtask::project::FUZZ_MANIFEST);
    std::fs::create_dir_all(fuzz.parent().unwrap())?;
    std::fs::write(&fuzz, "[package\n")?;
    let before = snapshot(&ws.layout.root);
    let old = xtask::pin::Line::Pinned(ws.published.pin.clone());
    let moved = vendor::update(
        &ws.layout,
        std::slice::from_ref(&old),
        Some(std::slice::from_ref(&ws.published)),
        std::slice::from_ref(&next),
    );
    assert!(moved.is_err());
    assert!(snapshot(&ws.layout.root) == before, "the workspace changed");
    // Mended, the same move writes the patch again, on the new release.
    std::fs::write(&fuzz, "[package]\nname = \"fuzz\"\n")?;
    let published = Some(std::slice::from_ref(&ws.published));
    vendor::update(&ws.layout, &[old], published, std::slice::from_ref(&next))?;
    let after = std::fs::read(ws.layout.patches().join(PATCH_NAME))?;
    assert_ne!(after, patch, "the patch is written again onto the release");
    Ok(())
}

/// A second published crate beside the fixture one, as candle publishes candle-nn.
fn candle_nn() -> Result<xtask::published::Published> {
    let files = vec![
        file(
            ".cargo_vcs_info.json",
            "{\n  \"git\": {\n    \"sha1\": \"59f8e903ca80a32ea7f8514b39748fc979e69e82\"\n  },\n  \"path_in_vcs\": \"candle-nn\"\n}",
        ),
        file("Cargo.toml", "[package]\nname = \"candle-nn\"\nversion = \"0.11.1\"\n"),
        file("src/sampling.rs", "let u = rand(1e-7, 0.999);\n"),
        file("src/ops.rs", "let rows = xs.par_chunks(dim);\n"),
    ];
    let bytes = pack("candle-nn", "0.11.1", &files)?;
    xtask::published::unpack(&bytes, "candle-nn", "0.11.1")
}

/// A `git format-patch` file of one commit that runs `change` on a repository holding both
/// crates where candle's repository holds them.
fn patch_of_both(
    crates: &[&xtask::published::Published],
    message: &str,
    change: impl FnOnce(&std::path::Path) -> Result<()>,
) -> Result<Vec<u8>> {
    let temp = kept::dir("two-crates")?;
    let repo = git2::Repository::init(temp.path())?;
    for krate in crates {
        for f in &krate.files {
            let path = temp.path().join(&krate.pin.path_in_vcs).join(&f.path);
            std::fs::create_dir_all(path.parent().unwrap())?;
            std::fs::write(path, &f.data)?;
        }
    }
    commit_all(&repo, "Initial commit")?;
    change(temp.path())?;
    let commit = repo.find_commit(commit_all(&repo, message)?)?;
    xtask::series::email(&commit)
}

#[test]
fn a_patch_may_touch_several_pinned_crates() -> Result<()> {
    let ws = workspace()?;
    let nn = candle_nn()?;
    let both = [ws.published.clone(), nn.clone()];
    std::fs::write(
        ws.layout.pin(),
        xtask::pin::render(&[ws.published.pin.clone(), nn.pin.clone()]),
    )?;
    let patch = patch_of_both(&[&ws.published, &nn], SUBJECT, |root| {
        raise_threshold(root)?;
        edit(root, "candle-nn/src/sampling.rs", "0.999", "1.0")
    })?;
    ws.add_patch(PATCH_NAME, &patch)?;
    crate::common::vendor(&ws.layout, &both)?;
    let root = &ws.layout.root;
    let sampling = std::fs::read_to_string(root.join("crates/vendor/candle-nn/src/sampling.rs"))?;
    assert_eq!(sampling, "let u = rand(1e-7, 1.0);\n");
    let module = std::fs::read_to_string(
        root.join("crates/vendor/candle-transformers/src/generation/mod.rs"),
    )?;
    assert!(module.contains(NEW_LINE));
    // The point holds both parts of candle-nn in one folder: the patched `sampling`, and `ops`.
    let nn_part =
        |file: &str| std::fs::read_to_string(root.join("crates/vendor/points/0001/nn").join(file));
    assert_eq!(nn_part("sampling.rs")?, "let u = rand(1e-7, 1.0);\n");
    assert_eq!(nn_part("ops.rs")?, "let rows = xs.par_chunks(dim);\n");
    crate::common::check_generated(&ws.layout, &both)?;

    // A patch to a crate that is not pinned names the file and what to do.
    let outside = patch_of_both(&[&ws.published, &nn], SUBJECT, |root| {
        std::fs::create_dir_all(root.join("candle-core/src"))?;
        std::fs::write(root.join("candle-core/src/lib.rs"), "// new\n")?;
        Ok(())
    })?;
    ws.add_patch("0002-generation-Touch-candle-core.patch", &outside)?;
    let before = snapshot(root);
    let err = format!(
        "{:#}",
        crate::common::vendor(&ws.layout, &both).unwrap_err()
    );
    assert!(
        err.starts_with(
            "0002-generation-Touch-candle-core.patch changes candle-core/src/lib.rs, which is in \
             none of the pinned crates (candle-transformers 0.11.1 and candle-nn 0.11.1)"
        ),
        "{err}"
    );
    assert!(snapshot(root) == before, "the workspace changed");
    Ok(())
}
