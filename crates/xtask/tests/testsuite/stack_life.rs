//! The stack outlives its first merge: as its pull requests land on `main` one by one, and as
//! other pull requests move the lines around them, `pr` rebuilds what is left.

use crate::common::stack::*;
use crate::common::*;
use anyhow::Result;
use git2::Repository;
use xtask::cherry_pick::{Stop, Stopped};
use xtask::pr::{self, BranchPlan, Existing};

fn stack(repo: &Repository, existing: Existing) -> Result<BranchPlan> {
    let series = series(stack_patches()?, "", &[("0002", "0001")])?;
    let contributor = pr::contributor(repo, None)?;
    pr::prepare(
        repo,
        &[published()?],
        &series,
        "main",
        &contributor,
        existing,
        &crate::common::stack::no_fallback,
    )
    .and_then(|planned| made(repo, planned))
}

#[test]
fn each_merge_leaves_one_branch_fewer_and_names_what_landed() -> Result<()> {
    let (_dir, repo) = candle()?;
    let first = stack(&repo, Existing::Refuse)?;
    let order: Vec<(String, String)> = first
        .built
        .stack
        .iter()
        .map(|e| (e.branch.clone(), e.patch.message.subject.clone()))
        .collect();
    assert_eq!(order.len(), 3);
    for (merged, (branch, title)) in order.iter().enumerate() {
        let number = 3900 + merged as u32;
        let landed_as = squash_merge(&repo, branch, title, number)?;
        let next = stack(&repo, Existing::Move)?;
        assert_eq!(
            next.built.stack.len(),
            order.len() - merged - 1,
            "after {branch}"
        );
        let last = next.built.landed.last().expect("the merged patch is named");
        assert_eq!(last.patch.message.subject, *title);
        assert_eq!(
            last.commit,
            Some((landed_as, format!("{title} (#{number})")))
        );
        assert_eq!(next.built.landed.len(), merged + 1);
        // What is left starts from main, where its parent landed.
        if let Some(entry) = next.built.stack.first() {
            assert_eq!(entry.parent, None);
            let commit = repo.find_commit(entry.commit)?;
            assert_eq!(commit.parent_id(0)?, landed_as);
        }
        if next.built.stack.is_empty() {
            let console = xtask::pr::summary::order(&next.built.stack, &[]);
            assert_eq!(
                console,
                "Every proposed patch has landed in the base: nothing is left to propose.\n"
            );
        }
        let summary = xtask::pr::summary::landed(&next.built.landed);
        assert!(
            summary.contains(&format!("\"{title} (#{number})\", pull request #{number}")),
            "{summary}"
        );
    }

    // The whole command at the end of the stack's life: it says so, writes target/pr/, and
    // succeeds.
    let ws = stack_workspace()?;
    let (console, result) = run_pr(&ws, &repo)?;
    result?;
    expect_test::expect_file!["../snapshots/console-every-patch-landed.txt"].assert_eq(&console);
    let stack_txt = std::fs::read_to_string(ws.layout.target().join("pr/stack.txt"))?;
    assert!(
        stack_txt.contains("Every proposed patch has landed in the base: nothing is left"),
        "{stack_txt}"
    );
    assert!(stack_txt.starts_with("Already in the base"), "{stack_txt}");
    Ok(())
}

#[test]
fn a_moved_context_merges_three_ways_and_a_true_conflict_is_named() -> Result<()> {
    let (dir, repo) = candle()?;
    // Another pull request rewords the comment two lines above the first patch's line.
    change_main(&repo, MODULE, &|t| {
        t.replace("Left as-is on purpose.", "Left as it is, on purpose.")
    })?;
    let prepared = stack(&repo, Existing::Refuse)?;
    let module = String::from_utf8(blob_at(&repo, prepared.built.stack[0].commit, MODULE)?)?;
    assert!(module.contains(NEW_LINE), "the first patch's change");
    assert!(
        module.contains("Left as it is, on purpose."),
        "main's change"
    );
    assert!(prepared.built.landed.is_empty());

    // Another changes the very line the first patch changes: a conflict, named with both sides.
    let (_dir2, repo2) = candle()?;
    change_main(&repo2, MODULE, &|t| {
        t.replace(OLD_LINE, "if v < 1e-8 { None } else { Some(v) }")
    })?;
    let prepared = stack(&repo2, Existing::Refuse)?;
    let Some(Stopped {
        patch,
        why: stop @ Stop::PassedOver(_),
        ..
    }) = prepared.built.stopped.first()
    else {
        panic!("the first patch conflicts: {:?}", prepared.built.stopped);
    };
    let conflict = stop.said().expect("a conflict in words");
    assert_eq!(patch.number(), "0001");
    assert!(
        conflict.contains("0001-generation-Raise-the-threshold.patch conflicts with the tree it goes on, in candle-transformers/src/generation/mod.rs"),
        "{conflict}"
    );
    assert!(
        conflict.contains("| <<<<<<<") && conflict.contains("1e-8") && conflict.contains("1e-6"),
        "{conflict}"
    );
    drop(dir);
    Ok(())
}

#[test]
fn a_conflict_stops_its_own_branch_and_not_the_stack() -> Result<()> {
    let ws = stack_workspace()?;
    let (_dir, repo) = candle()?;
    let (_, made) = run_pr(&ws, &repo)?;
    // What pr says it wrote: the three branches, and target/pr/.
    let written = made?;
    let branches = [
        "raise-the-threshold",
        "raise-it-again",
        "test-argmax-on-ties",
    ];
    assert_eq!(written.branches, branches);
    assert_eq!(written.out, ws.layout.target().join("pr"));
    let tip = |name: &str| branch_tip(&repo, name);
    let before = [tip("raise-the-threshold")?, tip("raise-it-again")?];

    // Another pull request changes the very line the first patch changes.
    let main = change_main(&repo, MODULE, &|t| {
        t.replace(OLD_LINE, "if v < 1e-8 { None } else { Some(v) }")
    })?;
    let (console, result) = run_pr(&ws, &repo)?;
    expect_test::expect_file!["../snapshots/console-a-patch-conflicts.txt"].assert_eq(&console);
    let err = format!("{:#}", result.unwrap_err());
    assert!(
        err.starts_with("0001-generation-Raise-the-threshold.patch conflicts with the base"),
        "{err}"
    );
    // The conflict in full: the file, both sides, and how to redo the patch.
    for said in [
        "0001-generation-Raise-the-threshold.patch conflicts with the tree it goes on, in candle-transformers/src/generation/mod.rs",
        "if v < 1e-8 { None } else { Some(v) });\n        | =======",
        "if v < 1e-6 { None } else { Some(v) });\n        | >>>>>>> the change",
        "to redo it:",
        "0002: \"generation: Raise it again\": it builds on 0001",
    ] {
        assert!(console.contains(said), "`{said}` in\n{console}");
    }
    // The third patch's branch moved onto the new main; the first two stayed where they were.
    let third = repo.find_commit(tip("test-argmax-on-ties")?)?;
    assert_eq!(third.parent_id(0)?, main);
    assert_eq!(
        [tip("raise-the-threshold")?, tip("raise-it-again")?],
        before
    );
    // target/pr/ holds the branch that was made, and stack.txt names the conflict.
    let out = ws.layout.target().join("pr");
    assert!(out.join("test-argmax-on-ties/body.md").is_file());
    assert!(!out.join("raise-the-threshold").exists());
    let stack_txt = std::fs::read_to_string(out.join("stack.txt"))?;
    assert!(stack_txt.contains("  0001: \"generation: Raise the threshold\": it conflicts:"));
    Ok(())
}

#[test]
fn a_release_that_holds_a_patch_retires_it_and_moves_the_rest() -> Result<()> {
    let ws = workspace()?;
    for patch in stack_patches()? {
        ws.add_patch(&patch.file_name, &patch.bytes)?;
    }
    let dir = ws.layout.patches();
    std::fs::write(dir.join("stack.toml"), "[builds-on]\n\"0002\" = \"0001\"\n")?;
    let first = xtask::series::Series::load(&dir)?.patches[0].clone();
    std::fs::write(
        dir.join(xtask::series::notes::file_name(&first.file_name)),
        "Notes.\n",
    )?;
    crate::common::vendor(&ws.layout, std::slice::from_ref(&ws.published))?;
    commit_all(&Repository::init(&ws.layout.root)?, "series")?;
    let before: Vec<_> = xtask::series::Series::load(&dir)?.patches;

    // 0.11.2 holds the first patch's change, and a line more at the top of the module, which
    // moves the second patch's lines.
    let mut files = crate_files();
    files[1] = file(
        "Cargo.toml",
        "[package]\nname = \"candle-transformers\"\nversion = \"0.11.2\"\n",
    );
    let module = String::from_utf8(published_generation())?.replace(OLD_LINE, NEW_LINE);
    files[2] = file("src/generation/mod.rs", format!("//! 0.11.2\n{module}"));
    let bytes = pack("candle-transformers", "0.11.2", &files)?;
    let next = xtask::published::unpack(&bytes, "candle-transformers", "0.11.2")?;

    // The folders and the pin move with the series: `vendor --version 0.11.2`, with the
    // workspace's manifest, whose candle versions move too.
    let manifest = xtask::project::Layout::workspace().root.join("Cargo.toml");
    std::fs::copy(&manifest, ws.layout.root.join("Cargo.toml"))?;
    let old = xtask::pin::Line::Pinned(ws.published.pin.clone());
    let published = std::slice::from_ref(&next);
    let vendored = xtask::vendor::update(
        &ws.layout,
        &[old],
        Some(std::slice::from_ref(&ws.published)),
        published,
    )?;
    // The first retires, the second is written again, and the third, which keeps its bytes, is
    // not named.
    let moved = [
        (before[0].file_name.clone(), xtask::vendor::Moved::Retired),
        (before[1].file_name.clone(), xtask::vendor::Moved::Rewritten),
    ];
    assert_eq!(vendored.moved, moved);
    assert_eq!(
        vendored.pinned.as_deref(),
        Some("candle-transformers 0.11.2")
    );
    let said = vendored.to_string();
    let retired = format!("[vendor] {}: the release holds it", before[0].file_name);
    assert!(said.contains(&retired), "{said}");
    let after = xtask::series::Series::load(&dir)?.patches;
    let names: Vec<&str> = after.iter().map(|p| p.file_name.as_str()).collect();
    assert_eq!(
        names,
        [before[1].file_name.as_str(), before[2].file_name.as_str()]
    );
    assert_ne!(
        after[0].bytes, before[1].bytes,
        "the second is written again"
    );
    assert_eq!(
        after[1].bytes, before[2].bytes,
        "the third patch keeps its bytes"
    );
    assert!(!dir
        .join(xtask::series::notes::file_name(&first.file_name))
        .exists());
    let stack_file = xtask::series::Series::load(&dir)?.stack;
    assert!(stack_file.builds_on.is_empty(), "{stack_file:?}");
    let retired = &stack_file.retired["0001"];
    assert_eq!(retired.version.as_deref(), Some("0.11.2"));
    assert!(
        retired.why.contains("generation: Raise the threshold"),
        "{}",
        retired.why
    );

    // The rest is vendored onto the release, the pin names it, and check's proofs hold.
    assert_eq!(
        xtask::pin::read(&ws.layout.pin())?,
        std::slice::from_ref(&next.pin)
    );
    crate::common::check_generated(&ws.layout, published)?;
    xtask::check::check_index_lines(published, &after)?;
    xtask::series::Series::load(&dir).map(drop)
}
