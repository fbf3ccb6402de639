//! A contributor's round trip through a clone never loses work: `pr` makes the stack, a branch is
//! changed there, and `format-patch` writes back that patch alone; a commit made by hand is never
//! dropped in silence; a new patch takes the next free number.

use std::path::Path;

use crate::common::stack::*;
use crate::common::*;
use anyhow::Result;
use git2::{Oid, Repository};
use tempfile::TempDir;
use xtask::format_patch::{self, Became, Options};
use xtask::pr::{self, BranchPlan, Existing};
use xtask::series::notes;
use xtask::series::Patch;

/// The author of the fixture's patches, as `commit_all` writes them: the commits `pr` makes
/// are theirs, so that a round trip that changes nothing gives the same bytes.
fn contributor() -> Result<git2::Signature<'static>> {
    Ok(git2::Signature::now("Ada Contributor", "ada@example.com")?)
}

/// The fixture's workspace, its series committed with a note for 0003, and a clone with the
/// stack `pr` made in it (and a branch of the whole series, `series`).
struct Trip {
    ws: Workspace,
    _candle_dir: TempDir,
    repo: Repository,
    prepared: BranchPlan,
}

fn trip(stack_toml: &str) -> Result<Trip> {
    let ws = workspace()?;
    for patch in stack_patches()? {
        ws.add_patch(&patch.file_name, &patch.bytes)?;
    }
    let dir = ws.layout.patches();
    std::fs::write(dir.join("stack.toml"), stack_toml)?;
    let third = &xtask::series::Series::load(&dir)?.patches[2];
    std::fs::write(
        dir.join(notes::file_name(&third.file_name)),
        "## Why\n\nTies.\n",
    )?;
    commit_all(&Repository::init(&ws.layout.root)?, "series")?;
    let (candle_dir, repo) = candle()?;
    let prepared = make_stack(&ws, &repo, Existing::Refuse)?;
    Ok(Trip {
        ws,
        _candle_dir: candle_dir,
        repo,
        prepared,
    })
}

fn make_stack(ws: &Workspace, repo: &Repository, existing: Existing) -> Result<BranchPlan> {
    let dir = ws.layout.patches();
    let all = xtask::series::Series::load(&dir)?;
    let (proposed, _) = all.stack.split_carried(all.patches.clone());
    let mut series = series(proposed, "", &[])?;
    series.linear = all.patches.clone();
    series.series = all;
    series.series_branch = Some("series".to_string());
    pr::prepare(
        repo,
        std::slice::from_ref(&ws.published),
        &series,
        "main",
        &contributor()?,
        existing,
        &crate::common::stack::no_fallback,
    )
    .and_then(|planned| made(repo, planned))
}

fn write_back(trip: &Trip, branch: &str, drop: &[&str]) -> Result<format_patch::WroteBack> {
    let options = Options {
        candle: trip.repo.workdir().unwrap().to_path_buf(),
        branch: branch.to_string(),
        base: "main".to_string(),
        drop: drop.iter().map(|n| n.to_string()).collect(),
    };
    format_patch::write_back(
        &trip.ws.layout,
        &options,
        std::slice::from_ref(&trip.ws.published),
    )
}

/// Every file of `patches/`, by name, with its bytes.
fn patches_dir(trip: &Trip) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(trip.ws.layout.patches())? {
        let entry = entry?;
        files.push((
            entry.file_name().to_string_lossy().into_owned(),
            std::fs::read(entry.path())?,
        ));
    }
    files.sort();
    Ok(files)
}

/// The files whose bytes differ between two listings, and those only one of them has.
fn changed(before: &[(String, Vec<u8>)], after: &[(String, Vec<u8>)]) -> Vec<String> {
    let mut names: Vec<String> = before.iter().chain(after).map(|(n, _)| n.clone()).collect();
    names.sort();
    names.dedup();
    let get = |list: &[(String, Vec<u8>)], name: &str| {
        list.iter().find(|(n, _)| n == name).map(|(_, b)| b.clone())
    };
    names
        .into_iter()
        .filter(|n| get(before, n) != get(after, n))
        .collect()
}

/// How a test changes a branch, as a contributor does in a clone.
enum Commit<'a> {
    /// `git commit --amend`, with a new message or the old one.
    Amend(Option<&'a str>),
    /// A new commit on top, as a reviewer's fix is made.
    OnTop(&'a str),
}

/// Changes `branch`, its file at `path` edited by `edit`, the way `how` says. Returns the new tip.
fn change(
    repo: &Repository,
    branch: &str,
    path: &str,
    edit: &dyn Fn(&str) -> String,
    how: Commit<'_>,
) -> Result<Oid> {
    // A handle of its own: `pr` leaves an in-memory object store on the one it used.
    let repo = &Repository::open(repo.path())?;
    let tip = repo.find_commit(branch_tip(repo, branch)?)?;
    let tree = tip.tree()?;
    let blob = repo.find_blob(tree.get_path(Path::new(path))?.id())?;
    let text = String::from_utf8(blob.content().to_vec())?;
    let mut update = git2::build::TreeUpdateBuilder::new();
    let edited = repo.blob(edit(&text).as_bytes())?;
    update.upsert(path, edited, git2::FileMode::Blob);
    let tree = repo.find_tree(update.create_updated(repo, &tree)?)?;
    let (author, committer) = (tip.author(), tip.committer());
    let id = match how {
        Commit::Amend(message) => {
            let message = message.unwrap_or(tip.message().unwrap_or_default());
            let parent = tip.parent(0)?;
            repo.commit(None, &author, &committer, message, &tree, &[&parent])?
        }
        Commit::OnTop(message) => {
            repo.commit(None, &author, &committer, message, &tree, &[&tip])?
        }
    };
    repo.branch(branch, &repo.find_commit(id)?, true)?;
    Ok(id)
}

/// The lines of a patch's diff, past its message, less the `index` lines and the hunks' `@@`
/// headers: what the patch changes, wherever the lines now are.
fn change_lines(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let diff = &text[text.find("\ndiff --git").unwrap()..];
    let lines = diff
        .lines()
        .filter(|l| !l.starts_with("index ") && !l.starts_with("@@"));
    lines.map(str::to_string).collect()
}

const STACK: &str = "[builds-on]\n\"0002\" = \"0001\"\n";

#[test]
fn a_round_trip_that_changes_nothing_leaves_patches_byte_identical() -> Result<()> {
    let trip = trip(STACK)?;
    let before = patches_dir(&trip)?;
    for entry in &trip.prepared.built.stack {
        write_back(&trip, &entry.branch, &[])?;
        assert_eq!(
            changed(&before, &patches_dir(&trip)?),
            Vec::<String>::new(),
            "{}",
            entry.branch
        );
    }
    let wrote = write_back(&trip, "series", &[])?;
    assert_eq!(changed(&before, &patches_dir(&trip)?), Vec::<String>::new());
    assert_eq!(
        wrote.to_string(),
        "[format-patch] unchanged: 0001, 0002, 0003\nnow run `cargo xtask vendor`, then `cargo \
         xtask check`\n"
    );
    // Every patch carries the zero commit id on its first line, as `--zero-commit` writes it.
    for patch in xtask::series::Series::load(&trip.ws.layout.patches())?.patches {
        assert!(patch
            .bytes
            .starts_with(format!("From {} ", "0".repeat(40)).as_bytes()));
    }
    Ok(())
}

#[test]
fn amending_one_branch_writes_back_that_patch_alone() -> Result<()> {
    let trip = trip(STACK)?;
    let before = patches_dir(&trip)?;
    let third = &trip.prepared.built.stack[2];
    change(
        &trip.repo,
        &third.branch,
        TESTS,
        &|t| {
            t.replace(
                "fn sample_ties() -> Result<()> {",
                "fn sample_ties() -> Result<()> {\n    // Reviewed.",
            )
        },
        Commit::Amend(None),
    )?;
    let wrote = write_back(&trip, &third.branch, &[])?;
    let after = patches_dir(&trip)?;
    assert_eq!(changed(&before, &after), [third.patch.file_name.as_str()]);
    // What format-patch says: the third written from its one commit, the others unchanged.
    let became: Vec<&Became> = wrote.patches.iter().map(|p| &p.became).collect();
    let [Became::Unchanged, Became::Unchanged, Became::Written {
        from,
        commits: 1,
        new: false,
    }] = &became[..]
    else {
        panic!("only the third is written: {wrote:?}");
    };
    assert!(from.ends_with(" generation: Test argmax on ties"), "{from}");
    let written = xtask::series::Series::load(&trip.ws.layout.patches())?.patches;
    assert!(String::from_utf8_lossy(&written[2].bytes).contains("+    // Reviewed."));
    // The series still vendors, and check's proofs hold.
    vendor_and_check(&trip)?;

    // Amending the first patch moves the lines of the second, which builds on it: the second
    // keeps its change, and only its index lines and line numbers follow.
    let first = &trip.prepared.built.stack[0];
    change(
        &trip.repo,
        &first.branch,
        MODULE,
        &|t| format!("// Reviewed.\n{t}"),
        Commit::Amend(None),
    )?;
    commit_all(&Repository::open(&trip.ws.layout.root)?, "third")?;
    let wrote = write_back(&trip, &first.branch, &[])?;
    let again = patches_dir(&trip)?;
    let became: Vec<&Became> = wrote.patches.iter().map(|p| &p.became).collect();
    assert!(
        matches!(
            became[..],
            [Became::Written { .. }, Became::Followed, Became::Unchanged]
        ),
        "{wrote:?}"
    );
    let mut expected = vec![
        first.patch.file_name.clone(),
        trip.prepared.built.stack[1].patch.file_name.clone(),
    ];
    expected.sort();
    assert_eq!(changed(&after, &again), expected);
    let [old, new] = [&after, &again].map(|list| {
        list.iter()
            .find(|(n, _)| *n == expected[1])
            .unwrap()
            .1
            .clone()
    });
    assert_ne!(old, new);
    assert_eq!(change_lines(&old), change_lines(&new));
    vendor_and_check(&trip)
}

fn vendor_and_check(trip: &Trip) -> Result<()> {
    let published = [trip.ws.published.clone()];
    crate::common::vendor(&trip.ws.layout, &published)?;
    crate::common::check_generated(&trip.ws.layout, &published)?;
    let series = xtask::series::Series::load(&trip.ws.layout.patches())?;
    xtask::check::check_index_lines(&published, &series.patches)?;
    Ok(())
}

#[test]
fn rewording_a_commit_changes_only_that_patchs_message_and_moves_its_notes() -> Result<()> {
    let trip = trip(STACK)?;
    let before = patches_dir(&trip)?;
    let third = &trip.prepared.built.stack[2];
    // `git commit --amend` with another message and the same change, then written back.
    let reword = |message: &str| -> Result<()> {
        let same = |t: &str| t.to_string();
        change(
            &trip.repo,
            &third.branch,
            TESTS,
            &same,
            Commit::Amend(Some(message)),
        )?;
        write_back(&trip, &third.branch, &[]).map(drop)
    };
    reword("generation: Test argmax on ties\n\nTies were not tested, and a review asked why.\n")?;
    let after = patches_dir(&trip)?;
    assert_eq!(changed(&before, &after), [third.patch.file_name.as_str()]);
    let [old, new] = [&before, &after].map(|list| {
        list.iter()
            .find(|(n, _)| *n == third.patch.file_name)
            .unwrap()
            .1
            .clone()
    });
    assert_eq!(change_lines(&old), change_lines(&new));
    let new_text = String::from_utf8(new)?;
    assert!(new_text.contains("a review asked why."));

    // A new subject renames the patch, and its notes with it.
    commit_all(&Repository::open(&trip.ws.layout.root)?, "reworded")?;
    reword("generation: Test argmax when logits tie\n\nTies were not tested.\n")?;
    let names: Vec<String> = patches_dir(&trip)?.into_iter().map(|(n, _)| n).collect();
    assert!(
        names.contains(&"0003-generation-Test-argmax-when-logits-tie.patch".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"0003-generation-Test-argmax-when-logits-tie.md".to_string()),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("on-ties")), "{names:?}");
    vendor_and_check(&trip)
}

#[test]
fn a_new_patch_from_the_series_branch_takes_the_next_free_number() -> Result<()> {
    let retired = "[retired.0004]\nwhy = \"folded into 0001\"\n";
    let trip = trip(&format!("{STACK}\n{retired}"))?;
    change(
        &trip.repo,
        "series",
        MODULE,
        &|t| format!("//! More.\n{t}"),
        Commit::OnTop("generation: Test more\n\nMore.\n"),
    )?;
    let wrote = write_back(&trip, "series", &[])?;
    let last = wrote
        .patches
        .last()
        .map(|p| (p.number.as_str(), p.file_name.as_str(), &p.became));
    let Some(("0005", "0005-generation-Test-more.patch", Became::Written { new: true, .. })) = last
    else {
        panic!("the new patch is named last: {wrote:?}");
    };
    let names: Vec<String> = xtask::series::Series::load(&trip.ws.layout.patches())?
        .patches
        .into_iter()
        .map(|p| p.file_name)
        .collect();
    assert_eq!(
        names.last().map(String::as_str),
        Some("0005-generation-Test-more.patch")
    );
    assert_eq!(names.len(), 4);
    vendor_and_check(&trip)?;

    // A patch named with a retired number is refused by check, which names the next free one.
    let dir = trip.ws.layout.patches();
    std::fs::rename(
        dir.join("0005-generation-Test-more.patch"),
        dir.join("0004-generation-Test-more.patch"),
    )?;
    let err = vendor_and_check(&trip).unwrap_err().to_string();
    assert_eq!(
        err,
        "0004-generation-Test-more.patch takes the number 0004, which patches/stack.toml retired \
         ([retired.0004]): give it the next free number, 0005"
    );
    Ok(())
}

#[test]
fn a_series_branch_that_leaves_out_a_patch_is_refused_unless_dropped_by_name() -> Result<()> {
    let trip = trip(STACK)?;
    // The series branch without its last commit: writing it back would drop 0003.
    let series_tip = trip.repo.find_commit(branch_tip(&trip.repo, "series")?)?;
    trip.repo.branch("short", &series_tip.parent(0)?, false)?;
    let before = patches_dir(&trip)?;
    let err = write_back(&trip, "short", &[]).unwrap_err().to_string();
    assert!(
        err.contains("0003-generation-Test-argmax-on-ties.patch"),
        "{err}"
    );
    assert!(err.contains("--drop 0003"), "{err}");
    assert_eq!(patches_dir(&trip)?, before);
    let wrote = write_back(&trip, "short", &["0003"])?;
    assert!(
        wrote
            .to_string()
            .starts_with("[format-patch] 0003-generation-Test-argmax-on-ties.patch: dropped; its number is retired"),
        "{wrote}"
    );
    let names: Vec<String> = patches_dir(&trip)?.into_iter().map(|(n, _)| n).collect();
    assert!(!names.iter().any(|n| n.starts_with("0003")), "{names:?}");
    let stack_file = xtask::series::Series::load(&trip.ws.layout.patches())?.stack;
    assert!(stack_file.retired["0003"]
        .why
        .contains("Test argmax on ties"));
    vendor_and_check(&trip)?;

    // A dropped patch leaves [builds-on] too, where it built on another.
    commit_all(&Repository::open(&trip.ws.layout.root)?, "dropped 0003")?;
    let first = trip
        .repo
        .find_commit(branch_tip(&trip.repo, "short")?)?
        .parent(0)?;
    trip.repo.branch("shorter", &first, false)?;
    write_back(&trip, "shorter", &["0002"])?;
    let stack_file = xtask::series::Series::load(&trip.ws.layout.patches())?.stack;
    assert!(stack_file.builds_on.is_empty(), "{stack_file:?}");
    assert!(stack_file.retired.contains_key("0002"));
    vendor_and_check(&trip)
}

/// A branch `name` on the series branch's base: its commits picked in the order of `order`
/// (1 for the first patch's commit), `0` standing for a new commit that adds a file.
fn picked(trip: &Trip, name: &str, order: &[usize]) -> Result<()> {
    // A handle of its own: what `trip.repo` writes after `pr` may stay in memory.
    let repo = &Repository::open(trip.repo.path())?;
    let mut series = vec![repo.find_commit(branch_tip(repo, "series")?)?];
    while series.len() < 4 {
        let parent = series.last().unwrap().parent(0)?;
        series.push(parent);
    }
    series.reverse();
    let mut tip = series[0].clone();
    for &n in order {
        let tree = match n {
            0 => {
                let mut tree = repo.treebuilder(Some(&tip.tree()?))?;
                tree.insert("NEW.md", repo.blob(b"new\n")?, 0o100644)?;
                repo.find_tree(tree.write()?)?
            }
            n => {
                let mut index = repo.cherrypick_commit(&series[n], &tip, 0, None)?;
                repo.find_tree(index.write_tree_to(repo)?)?
            }
        };
        let message = match n {
            0 => "generation: Add a note\n",
            n => series[n].message().unwrap_or_default(),
        };
        let me = contributor()?;
        let id = repo.commit(None, &me, &me, message, &tree, &[&tip])?;
        tip = repo.find_commit(id)?;
    }
    repo.branch(name, &tip, false)?;
    Ok(())
}

/// The numbers are the order the series applies in: a branch that moves a patch's commit, or puts
/// a new commit before a patch's, is refused with what to do, and `patches/` stays as it was.
#[test]
fn a_series_branch_that_moves_a_patch_or_puts_a_new_one_first_is_refused() -> Result<()> {
    let trip = trip(STACK)?;
    let before = patches_dir(&trip)?;
    picked(&trip, "swapped", &[1, 3, 2])?;
    let err = write_back(&trip, "swapped", &[]).unwrap_err().to_string();
    assert_eq!(
        err,
        "`swapped` puts 0003-generation-Test-argmax-on-ties.patch after \
         0002-generation-Raise-it-again.patch: the numbers are the order the series applies in; \
         put the commits back in that order"
    );
    picked(&trip, "inserted", &[1, 0, 2, 3])?;
    let err = write_back(&trip, "inserted", &[]).unwrap_err().to_string();
    assert_eq!(
        err,
        "`inserted` has a new commit (generation: Add a note) before \
         0002-generation-Raise-it-again.patch: a new patch takes the next free number, so its \
         commit goes last on the branch"
    );
    assert_eq!(patches_dir(&trip)?, before);
    // Last on the branch, the same commit is a new patch.
    picked(&trip, "appended", &[1, 2, 3, 0])?;
    write_back(&trip, "appended", &[])?;
    let names: Vec<String> = patches_dir(&trip)?.into_iter().map(|(n, _)| n).collect();
    assert!(
        names.contains(&"0004-generation-Add-a-note.patch".to_string()),
        "{names:?}"
    );
    Ok(())
}

#[test]
fn fixes_written_back_one_after_another_keep_the_patch_whole() -> Result<()> {
    let trip = trip(STACK)?;
    let third = &trip.prepared.built.stack[2];
    for (round, line) in ["// first fix", "// second fix"].iter().enumerate() {
        let add = |t: &str| format!("{t}{line}\n");
        change(
            &trip.repo,
            &third.branch,
            TESTS,
            &add,
            Commit::OnTop("Fix, after review"),
        )?;
        write_back(&trip, &third.branch, &[])?;
        commit_all(
            &Repository::open(&trip.ws.layout.root)?,
            &format!("round {round}"),
        )?;
    }
    let written = xtask::series::Series::load(&trip.ws.layout.patches())?.patches;
    let text = String::from_utf8_lossy(&written[2].bytes);
    // The patch's own change, and both fixes.
    assert!(text.contains("+fn sample_ties() -> Result<()> {"), "{text}");
    assert!(
        text.contains("+// first fix") && text.contains("+// second fix"),
        "{text}"
    );
    vendor_and_check(&trip)
}

#[test]
fn force_branch_refuses_to_drop_a_commit_made_by_hand() -> Result<()> {
    let trip = trip(STACK)?;
    let third = &trip.prepared.built.stack[2];
    let fix = change(
        &trip.repo,
        &third.branch,
        TESTS,
        &|t| format!("{t}// fix\n"),
        Commit::OnTop("Fix the test, after review"),
    )?;
    let err = make_stack(&trip.ws, &trip.repo, Existing::Move)
        .unwrap_err()
        .to_string();
    let short = &fix.to_string()[..10];
    assert!(
        err.contains(&format!(
            "holds 1 commit that pr did not make:\n    {short} Fix the test, after review"
        )),
        "{err}"
    );
    assert!(err.contains("format-patch"), "{err}");
    assert_eq!(branch_tip(&trip.repo, &third.branch)?, fix);
    // Once written back, the fix is in patches/, and the branch may move.
    commit_all(&Repository::open(&trip.ws.layout.root)?, "before")?;
    write_back(&trip, &third.branch, &[])?;
    let written = xtask::series::Series::load(&trip.ws.layout.patches())?.patches;
    assert!(String::from_utf8_lossy(&written[2].bytes).contains("+// fix"));
    let prepared = make_stack(&trip.ws, &trip.repo, Existing::Move)?;
    assert_eq!(
        branch_tip(&trip.repo, &third.branch)?,
        prepared.built.stack[2].commit
    );
    let again = change(
        &trip.repo,
        &third.branch,
        TESTS,
        &|t| format!("{t}// again\n"),
        Commit::OnTop("Fix it again"),
    )?;
    // Asked for by name, the branch moves, and the commit with it.
    let err = make_stack(&trip.ws, &trip.repo, Existing::Move)
        .unwrap_err()
        .to_string();
    assert!(err.contains("Fix it again"), "{err}");
    let prepared = make_stack(&trip.ws, &trip.repo, Existing::MoveDroppingCommits)?;
    let tip = branch_tip(&trip.repo, &third.branch)?;
    assert_eq!(tip, prepared.built.stack[2].commit);
    assert_ne!(tip, again);
    // A branch pr made and nobody touched moves with --force-branch alone.
    make_stack(&trip.ws, &trip.repo, Existing::Move)?;
    Ok(())
}

#[test]
fn format_patch_refuses_a_clone_with_uncommitted_changes() -> Result<()> {
    let trip = trip(STACK)?;
    let before = patches_dir(&trip)?;
    let workdir = trip.repo.workdir().unwrap().to_path_buf();
    std::fs::write(workdir.join(MODULE), "// forgot to amend\n")?;
    let err = write_back(&trip, &trip.prepared.built.stack[0].branch, &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "has changes that are not committed (candle-transformers/src/generation/mod.rs)"
        ),
        "{err}"
    );
    assert_eq!(patches_dir(&trip)?, before);
    Ok(())
}

#[test]
fn check_names_a_stray_notes_file_a_stack_key_and_a_wrong_index_line() -> Result<()> {
    let trip = trip(STACK)?;
    let dir = trip.ws.layout.patches();
    std::fs::write(dir.join("0009-gone.md"), "notes\n")?;
    let err = vendor_and_check(&trip).unwrap_err().to_string();
    assert!(
        err.starts_with("patches/0009-gone.md belongs to no patch"),
        "{err}"
    );
    std::fs::remove_file(dir.join("0009-gone.md"))?;
    std::fs::write(
        dir.join("stack.toml"),
        format!("{STACK}\"0007\" = \"0001\"\n"),
    )?;
    let err = vendor_and_check(&trip).unwrap_err().to_string();
    assert_eq!(
        err,
        "patches/stack.toml names 0007, which is no patch in patches/"
    );
    std::fs::write(dir.join("stack.toml"), STACK)?;
    vendor_and_check(&trip)?;
    // An index line that names another blob than the series gives.
    let patches = xtask::series::Series::load(&dir)?.patches;
    let second = &patches[1];
    let line = &second.index_lines()[0];
    let text = String::from_utf8(second.bytes.clone())?;
    let wrong = text.replacen(&format!("index {}..", line.before), "index 1234567..", 1);
    std::fs::write(dir.join(&second.file_name), wrong)?;
    let err = vendor_and_check(&trip).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{}: its index line names 1234567 as {MODULE} before it, but the series gives {}",
            second.file_name, line.before
        )),
        "{err}"
    );
    let _: Vec<Patch> = patches;
    Ok(())
}

#[test]
fn a_write_back_that_would_break_a_branch_writes_nothing() -> Result<()> {
    let trip = trip(STACK)?;
    let before = patches_dir(&trip)?;
    // The first patch now also adds a line at the end of the tests, where the third, which
    // branches from main, adds its test: the third's branch would no longer merge.
    let first = &trip.prepared.built.stack[0];
    let add = |t: &str| format!("{t}// Reviewed.\n");
    change(&trip.repo, &first.branch, TESTS, &add, Commit::Amend(None))?;
    let err = format!("{:#}", write_back(&trip, &first.branch, &[]).unwrap_err());
    assert!(
        err.starts_with(
            "written back, the series would no longer make every branch; patches/ is as it was: \
             0003-generation-Test-argmax-on-ties.patch does not merge onto the base"
        ),
        "{err}"
    );
    assert_eq!(patches_dir(&trip)?, before);
    Ok(())
}
