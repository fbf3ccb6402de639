//! Either order: a stack is ready whether it merges before an upstream rewrite of the same code
//! (candle's #3496) or after it. Where the rewrite is in the base, `pr` takes the resolution the
//! workspace carries in `patches/on-<name>/` in place of the patch, and `format-patch` writes such
//! a branch back into that resolution.

use crate::common::stack::*;
use crate::common::*;
use anyhow::Result;
use git2::{Oid, Repository};
use xtask::format_patch;
use xtask::series::{self, Patch};

/// The stack's `stack.toml`, with the rewrite as `[base."3496"]`.
const STACK_TOML: &str = "[builds-on]\n\"0002\" = \"0001\"\n\n[base.\"3496\"]\nwhy = \"moves \
    sampling onto the backend\"\npath = \"candle-transformers/src/generation/sampling.rs\"\n\
    holds = \"pub fn apply_topk_mask\"\n";

/// What the third patch appends to the tests, and how the rewrite ends them.
const TIES: &str = "\n#[test]\nfn sample_ties() -> Result<()> {\n    Ok(())\n}\n";
const BACKEND: &str = "    check_on_the_backend(&counts)\n}\n\nmod backend;\n";

/// The rewrite lands on `main`: a module of its own, whose text marks it, and at the end of the
/// tests, where the third patch appends its own, a last line changed and a line appended, so
/// that the patch conflicts.
fn rewrite_lands(repo: &Repository) -> Result<Oid> {
    let main = repo.head()?.peel_to_commit()?;
    let tests = String::from_utf8(blob_at(repo, main.id(), TESTS)?)?;
    let end = tests.rfind("    Ok(())\n}\n").expect("the last test's end");
    let tests = format!("{}{BACKEND}", &tests[..end]);
    let sampling = "pub fn apply_topk_mask() {}\n";
    let mut update = git2::build::TreeUpdateBuilder::new();
    update.upsert(TESTS, repo.blob(tests.as_bytes())?, git2::FileMode::Blob);
    let path = "candle-transformers/src/generation/sampling.rs";
    update.upsert(path, repo.blob(sampling.as_bytes())?, git2::FileMode::Blob);
    let tree = update.create_updated(repo, &main.tree()?)?;
    commit_on_main(repo, tree, "Move sampling onto the backend (#3496)")
}

/// The third patch as it goes onto `main` with the rewrite, written as a contributor writes it:
/// a commit on `main` with the patch's message, by the clone's git identity at the patch's time
/// (as `pr` commits it), and `git format-patch`.
fn resolution(repo: &Repository, patch: &Patch) -> Result<Vec<u8>> {
    let main = repo.head()?.peel_to_commit()?;
    let tests = String::from_utf8(blob_at(repo, main.id(), TESTS)?)? + TIES;
    let mut update = git2::build::TreeUpdateBuilder::new();
    update.upsert(TESTS, repo.blob(tests.as_bytes())?, git2::FileMode::Blob);
    let tree = repo.find_tree(update.create_updated(repo, &main.tree()?)?)?;
    let message = &patch.message;
    let time = git2::Time::new(message.time.0, message.time.1);
    let me = repo.signature()?;
    let me = git2::Signature::new(me.name().unwrap(), me.email().unwrap(), &time)?;
    let id = repo.commit(None, &me, &me, &message.text(), &tree, &[&main])?;
    series::email(&repo.find_commit(id)?)
}

/// The stack's workspace with `STACK_TOML`, its series committed as `format-patch` wants it.
fn workspace_with_base() -> Result<Workspace> {
    let ws = stack_workspace()?;
    std::fs::write(ws.layout.patches().join("stack.toml"), STACK_TOML)?;
    Ok(ws)
}

fn third(ws: &Workspace) -> Result<Patch> {
    Ok(xtask::series::Series::load(&ws.layout.patches())?.patches[2].clone())
}

/// Carries `bytes` as the resolution of `patch` for #3496.
fn carry(ws: &Workspace, patch: &Patch, bytes: &[u8]) -> Result<std::path::PathBuf> {
    let dir = ws.layout.patches().join("on-3496");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(&patch.file_name);
    std::fs::write(&path, bytes)?;
    Ok(path)
}

#[test]
fn after_the_rewrite_a_carried_resolution_makes_every_branch() -> Result<()> {
    let ws = workspace_with_base()?;
    let (_dir, repo) = candle()?;
    let main = rewrite_lands(&repo)?;
    let patch = third(&ws)?;

    // Without a resolution the third patch conflicts, and the other two still get their branches.
    let (console, result) = run_pr(&ws, &repo)?;
    let err = format!("{:#}", result.unwrap_err());
    assert!(
        err.starts_with(&format!("{} conflicts with the base", patch.file_name)),
        "{err}"
    );
    assert!(console.contains("| mod backend;"), "{console}");
    assert!(console.contains("fn sample_ties()"), "{console}");
    assert!(console.contains("The base has #3496 (moves sampling onto the backend): no patch taken from patches/on-3496/"), "{console}");
    let made = ["raise-the-threshold", "raise-it-again"];
    for name in made {
        assert_eq!(
            repo.find_commit(branch_tip(&repo, name)?)?.parent_count(),
            1
        );
    }
    assert!(branch_tip(&repo, "test-argmax-on-ties").is_err());

    // With it, every branch is made, the third from the resolution.
    let resolved = resolution(&repo, &patch)?;
    carry(&ws, &patch, &resolved)?;
    let (console, result) = run_pr(&ws, &repo)?;
    result?;
    expect_test::expect_file!["../snapshots/console-resolution-taken.txt"].assert_eq(&console);
    let tip = repo.find_commit(branch_tip(&repo, "test-argmax-on-ties")?)?;
    assert_eq!(tip.parent_id(0)?, main);
    let tests = String::from_utf8(blob_at(&repo, tip.id(), TESTS)?)?;
    assert!(tests.ends_with(&format!("{BACKEND}{TIES}")), "{tests}");
    // The email in target/pr/ is the resolution, byte for byte.
    let written = ws
        .layout
        .target()
        .join("pr/test-argmax-on-ties")
        .join(&patch.file_name);
    assert_eq!(std::fs::read(written)?, resolved);

    // Without the rewrite in the base, the resolution is left alone.
    let (_dir2, before) = candle()?;
    let (console, result) = run_pr(&ws, &before)?;
    result?;
    assert!(!console.contains("on-3496"), "{console}");
    let tests = String::from_utf8(blob_at(
        &before,
        branch_tip(&before, "test-argmax-on-ties")?,
        TESTS,
    )?)?;
    assert!(
        tests.ends_with(TIES) && !tests.contains("backend"),
        "{tests}"
    );
    Ok(())
}

/// A body is written from the base it is opened on: on a base with the rewrite, no body quotes
/// what `main` prints, and the tables measured on the published crates are left out.
#[test]
fn a_body_on_the_rewritten_base_quotes_nothing_of_main() -> Result<()> {
    let ws = workspace_with_base()?;
    let (_dir, repo) = candle()?;
    rewrite_lands(&repo)?;
    let patch = third(&ws)?;
    carry(&ws, &patch, &resolution(&repo, &patch)?)?;
    let main_only = "On `main` this prints `Err(\"A weight is negative\")`.";
    let patches_dir = ws.layout.patches();
    for each in xtask::series::Series::load(&patches_dir)?.patches {
        let notes = format!("{main_only}\n\n## Test plan\n<!-- bench -->\n");
        let name = xtask::series::notes::file_name(&each.file_name);
        std::fs::write(patches_dir.join(name), notes)?;
    }
    // The third patch's notes for the rewritten base, with what that base prints.
    let on_base = "On `main` with #3496 this panics in `apply_topk_mask`.";
    let name = xtask::series::notes::file_name(&patch.file_name);
    let notes = format!("{on_base}\n\n## Test plan\n<!-- bench -->\n");
    std::fs::write(patches_dir.join("on-3496").join(&name), notes)?;

    let (_, result) = run_pr(&ws, &repo)?;
    result?;
    let body = |branch: &str| {
        let path = ws.layout.target().join("pr").join(branch).join("body.md");
        std::fs::read_to_string(path)
    };
    for branch in [
        "raise-the-threshold",
        "raise-it-again",
        "test-argmax-on-ties",
    ] {
        let body = body(branch)?;
        assert!(!body.contains("A weight is negative"), "{branch}: {body}");
        assert!(
            !body.contains("(The benchmark table is missing"),
            "{branch}: {body}"
        );
        let left_out = "(The benchmarks measure this change on candle-transformers 0.11.1, whose \
            sampler this base's #3496 rewrote, so they are left out here.)";
        assert!(body.contains(left_out), "{branch}: {body}");
    }
    let left_out = "(The example that shows this change on `main` is left out: this base has \
        #3496, and no example was written for it.)";
    assert!(body("raise-the-threshold")?.starts_with(left_out));
    assert!(body("test-argmax-on-ties")?.starts_with(on_base));

    // On `main` without the rewrite, the notes are the patch's own.
    let (_dir2, before) = candle()?;
    run_pr(&ws, &before)?.1?;
    assert!(body("test-argmax-on-ties")?.starts_with(main_only));

    // A rewrite that only adds code keeps `main`'s examples and tables, where its folder has no
    // notes for the patch.
    let adds_only = format!("{STACK_TOML}adds-only = true\n");
    std::fs::write(patches_dir.join("stack.toml"), adds_only)?;
    run_pr(&ws, &repo)?.1?;
    let kept = body("raise-the-threshold")?;
    assert!(kept.starts_with(main_only), "{kept}");
    assert!(!kept.contains("left out"), "{kept}");
    let measured =
        "(The benchmarks were measured on this change's branch from `main`: this base's \
        #3496 only adds code, which none of their rows runs.)";
    assert!(kept.contains(measured), "{kept}");
    assert!(body("test-argmax-on-ties")?.starts_with(on_base));
    Ok(())
}

/// A base whose file holds the marker's text but not the rewrite's code, as when another pull
/// request wrote the same line: the resolution does not apply, so `pr` tries the patch as
/// written, which must build there. It gets that branch or a named conflict, never a resolution
/// that does not fit.
#[test]
fn a_marker_without_the_rewrite_gets_the_patch_that_builds_or_a_conflict() -> Result<()> {
    let ws = workspace_with_base()?;
    let (_dir, other) = candle()?;
    rewrite_lands(&other)?;
    let patch = third(&ws)?;
    carry(&ws, &patch, &resolution(&other, &patch)?)?;
    // Another pull request writes the marker's text, and leaves the tests as they were.
    let (_dir2, repo) = candle()?;
    let main = repo.head()?.peel_to_commit()?;
    let mut update = git2::build::TreeUpdateBuilder::new();
    let marker = repo.blob(b"pub fn apply_topk_mask() { todo!() }\n")?;
    let path = "candle-transformers/src/generation/sampling.rs";
    update.upsert(path, marker, git2::FileMode::Blob);
    let tree = update.create_updated(&repo, &main.tree()?)?;
    commit_on_main(&repo, tree, "Mask top-k another way (#3770)")?;

    let dir = ws.layout.patches();
    let all = xtask::series::Series::load(&dir)?;
    let mut series = series(all.patches.clone(), "", &[("0002", "0001")])?;
    series.series.resolutions = all.resolutions;
    let contributor = xtask::pr::contributor(&repo, None)?;
    let published = [published()?];
    let prepare = |existing, builds: xtask::pr::stack::BuildCheck<'_>| {
        xtask::pr::prepare(
            &repo,
            &published,
            &series,
            "main",
            &contributor,
            existing,
            builds,
        )
        .and_then(|planned| made(&repo, planned))
    };

    // It builds: the branch holds the patch as written, and only it was checked.
    let checked = std::cell::RefCell::new(Vec::new());
    let builds = |p: &Patch, _: Oid, _: Oid| {
        checked.borrow_mut().push(p.bytes == patch.bytes);
        Ok(true)
    };
    let prepared = prepare(xtask::pr::Existing::Refuse, &builds)?;
    assert_eq!(*checked.borrow(), [true]);
    let third_entry = |prepared: &xtask::pr::BranchPlan| {
        let found = prepared
            .built
            .stack
            .iter()
            .find(|e| e.patch.number() == patch.number());
        found.map(|e| (e.patch.bytes.clone(), e.rewrite.clone(), e.commit))
    };
    let (bytes, resolution, commit) = third_entry(&prepared).expect("a branch for the patch");
    assert_eq!((bytes, resolution), (patch.bytes.clone(), None));
    let tests = String::from_utf8(blob_at(&repo, commit, TESTS)?)?;
    assert!(
        tests.ends_with(TIES) && !tests.contains("backend"),
        "{tests}"
    );
    assert!(prepared.built.rewrites.iter().all(|r| r.patches.is_empty()));

    // It does not build: no branch, and a conflict that names why each candidate was passed over.
    let prepared = prepare(xtask::pr::Existing::Move, &|_, _, _| Ok(false))?;
    assert!(third_entry(&prepared).is_none());
    let stopped = prepared
        .built
        .stopped
        .iter()
        .find(|s| s.patch.number() == patch.number());
    let Some(stop @ xtask::cherry_pick::Stop::PassedOver(tried)) = stopped.map(|s| &s.why) else {
        panic!(
            "no conflict for the third patch: {:?}",
            prepared.built.stopped
        );
    };
    use xtask::cherry_pick::{Tried, Why};
    let [(_, Why::Conflict(_)), (Tried::AsWritten, Why::DoesNotBuild)] = &tried[..] else {
        panic!("the resolution conflicts, the patch does not build: {tried:?}");
    };
    let why = stop.said().expect("a conflict in words");
    assert!(why.starts_with(&patch.file_name), "{why}");
    let also =
        "\nalso tried the patch as written: it applies to the base, but its branch does not \
        build there";
    assert!(why.ends_with(also), "{why}");
    Ok(())
}

#[test]
fn a_stack_merged_before_the_rewrite_leaves_nothing_to_propose() -> Result<()> {
    let ws = workspace_with_base()?;
    let (_dir, repo) = candle()?;
    let (_, made) = run_pr(&ws, &repo)?;
    made?;
    // A resolution made on a clone where the rewrite came first.
    let (_dir2, other) = candle()?;
    rewrite_lands(&other)?;
    let patch = third(&ws)?;
    carry(&ws, &patch, &resolution(&other, &patch)?)?;

    let subjects = [
        "Raise the threshold",
        "Raise it again",
        "Test argmax on ties",
    ];
    let branches = [
        "raise-the-threshold",
        "raise-it-again",
        "test-argmax-on-ties",
    ];
    // Each lands, and pr makes what is left again, as a contributor does after each merge.
    for (number, (branch, subject)) in (3900..).zip(branches.iter().zip(subjects)) {
        squash_merge(&repo, branch, &format!("generation: {subject}"), number)?;
        run_pr(&ws, &repo)?.1?;
    }
    rewrite_lands(&repo)?;
    let (console, result) = run_pr(&ws, &repo)?;
    result?;
    assert!(
        console
            .contains("Every proposed patch has landed in the base: nothing is left to propose."),
        "{console}"
    );
    assert!(
        console.contains("0003: \"generation: Test argmax on ties\": landed as"),
        "{console}"
    );
    assert!(
        console.contains("The base has #3496 (moves sampling onto the backend): no patch taken from patches/on-3496/"),
        "{console}"
    );
    assert!(ws.layout.target().join("pr/stack.txt").is_file());
    Ok(())
}

/// Every file under `dir`, by its path there, with its bytes.
fn files(dir: &std::path::Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            let inner = files(&path)?.into_iter();
            found.extend(inner.map(|(file, bytes)| (format!("{name}/{file}"), bytes)));
        } else {
            found.push((name, std::fs::read(&path)?));
        }
    }
    found.sort();
    Ok(found)
}

fn write_back(ws: &Workspace, repo: &Repository, branch: &str) -> Result<format_patch::WroteBack> {
    let options = format_patch::Options {
        candle: repo.workdir().unwrap().to_path_buf(),
        branch: branch.to_string(),
        base: "main".to_string(),
        drop: Vec::new(),
    };
    format_patch::write_back(&ws.layout, &options, std::slice::from_ref(&ws.published))
}

#[test]
fn a_resolved_branch_is_written_back_into_its_resolution() -> Result<()> {
    let ws = workspace_with_base()?;
    let (_dir, repo) = candle()?;
    // The patches' author, so that pr's commits give their bytes back.
    let mut config = repo.config()?;
    config.set_str("user.name", "Ada Contributor")?;
    config.set_str("user.email", "ada@example.com")?;
    rewrite_lands(&repo)?;
    let patch = third(&ws)?;
    carry(&ws, &patch, &resolution(&repo, &patch)?)?;
    commit_all(&Repository::init(&ws.layout.root)?, "series")?;
    let (_, made) = run_pr(&ws, &repo)?;
    made?;
    let dir = ws.layout.patches();
    let before = files(&dir)?;

    // Untouched, it comes back byte for byte, and so does every patch; a patch's branch written
    // back keeps the resolutions too.
    let wrote = write_back(&ws, &repo, "test-argmax-on-ties")?;
    assert!(files(&dir)? == before, "a round trip changed patches/");
    let shown = format!("patches/on-3496/{}", patch.file_name);
    assert_eq!(
        wrote.to_string(),
        format!("[format-patch] unchanged: {shown}\nnow run `cargo xtask check`\n")
    );
    write_back(&ws, &repo, "raise-the-threshold")?;
    assert!(files(&dir)? == before, "a round trip changed patches/");

    // Amended after review: the resolution changes, and nothing else.
    let branch = "test-argmax-on-ties";
    let tip = repo.find_commit(branch_tip(&repo, branch)?)?;
    let tests = String::from_utf8(blob_at(&repo, tip.id(), TESTS)?)?;
    let tests = tests.replace(
        "fn sample_ties() -> Result<()> {\n",
        "fn sample_ties() -> Result<()> {\n    // Reviewed.\n",
    );
    let mut update = git2::build::TreeUpdateBuilder::new();
    update.upsert(TESTS, repo.blob(tests.as_bytes())?, git2::FileMode::Blob);
    let tree = repo.find_tree(update.create_updated(&repo, &tip.tree()?)?)?;
    let reference = format!("refs/heads/{branch}");
    tip.amend(Some(&reference), None, None, None, None, Some(&tree))?;
    let wrote = write_back(&ws, &repo, branch)?;
    assert!(
        wrote
            .to_string()
            .starts_with(&format!("[format-patch] {shown} <- ")),
        "{wrote}"
    );
    let after = files(&dir)?;
    let changed: Vec<&str> = after
        .iter()
        .filter(|file| !before.contains(file))
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(changed, [format!("on-3496/{}", patch.file_name)]);
    let text = std::fs::read_to_string(dir.join("on-3496").join(&patch.file_name))?;
    assert!(text.contains("+    // Reviewed.\n"), "{text}");
    assert_eq!(after.len(), before.len());
    Ok(())
}

#[test]
fn check_names_a_resolution_that_stands_for_nothing() -> Result<()> {
    let ws = workspace_with_base()?;
    let dir = ws.layout.patches();
    let check = || xtask::check::run(&ws.layout).unwrap_err().to_string();
    std::fs::create_dir(dir.join("on-3497"))?;
    let err = check();
    assert!(
        err.starts_with(
            "patches/on-3497/ holds resolutions for a base that patches/stack.toml does not name"
        ),
        "{err}"
    );
    std::fs::remove_dir(dir.join("on-3497"))?;
    std::fs::create_dir(dir.join("on-3496"))?;
    std::fs::write(dir.join("on-3496/0003-generation-Test-ties.patch"), "")?;
    let err = check();
    assert!(
        err.starts_with("patches/on-3496/0003-generation-Test-ties.patch is not the file name of a patch in patches/"),
        "{err}"
    );
    std::fs::remove_file(dir.join("on-3496/0003-generation-Test-ties.patch"))?;
    std::fs::write(dir.join("on-3496/0003-generation-Test-ties.md"), "notes\n")?;
    let err = check();
    assert!(
        err.starts_with("patches/on-3496/0003-generation-Test-ties.md belongs to no patch"),
        "{err}"
    );
    std::fs::remove_file(dir.join("on-3496/0003-generation-Test-ties.md"))?;
    std::fs::write(
        dir.join("stack.toml"),
        format!("{STACK_TOML}adds-only = \"yes\"\n"),
    )?;
    let err = check();
    assert!(
        err.contains("stack.toml:")
            && err.ends_with("invalid type: string \"yes\", expected a boolean"),
        "{err}"
    );
    std::fs::write(
        dir.join("stack.toml"),
        STACK_TOML.replace("why = ", "reason = "),
    )?;
    let err = check();
    assert!(
        err.contains("stack.toml:")
            && err.ends_with(
                "unknown field `reason`, expected one of `why`, `path`, `holds`, `adds-only`"
            ),
        "{err}"
    );
    Ok(())
}

#[test]
fn a_carried_patch_that_does_not_go_onto_the_rewrite_stops_nothing() -> Result<()> {
    let ws = workspace_with_base()?;
    let stack_toml = format!("{STACK_TOML}\n[carried.0003]\nwhy = \"kept here\"\n");
    std::fs::write(ws.layout.patches().join("stack.toml"), stack_toml)?;
    let (_dir, repo) = candle()?;
    rewrite_lands(&repo)?;
    let patch = third(&ws)?;

    // The third patch conflicts with the rewrite, but it is proposed nowhere: the two others get
    // their branches, and pr succeeds, listing it apart from any conflict.
    let (console, result) = run_pr(&ws, &repo)?;
    result?;
    let subject = &patch.message.subject;
    let listed = format!(
        "Carried patches that do not go onto this base (they need no branch):\n  0003: \
         \"{subject}\"\n"
    );
    assert!(console.contains(&listed), "{console}");
    assert!(!console.contains("it conflicts"), "{console}");
    for name in ["raise-the-threshold", "raise-it-again"] {
        branch_tip(&repo, name)?;
    }
    Ok(())
}
