//! The committed fuzz corpus (`crates/fuzz/corpus/sample`, minimised by `cargo fuzz cmin`)
//! replayed through the fuzz target's own checks: no panic, every error one of ours, greedy
//! temperatures give the argmax.

use testbed::fuzz::{check, check_with};
use testbed::sampler::{Outcome, Upstream};

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = shared::root().join("crates/fuzz/corpus/sample");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn the_corpus_keeps_every_promise() {
    let corpus = corpus();
    assert!(corpus.len() >= 100, "only {} inputs", corpus.len());
    let broken: Vec<String> = corpus
        .iter()
        .filter_map(|(name, data)| {
            check(data)
                .err()
                .map(|finding| format!("{name}: {finding}"))
        })
        .collect();
    assert!(broken.is_empty(), "\n{}", broken.join("\n"));
}

/// The same inputs and checks catch upstream: it panics or breaks a promise on many of them.
#[test]
fn upstream_breaks_the_promises_on_the_corpus() {
    let corpus = corpus();
    let kept = |data: &[u8]| {
        let checked = Outcome::of(|| Ok(u32::from(check_with(Upstream, data).is_ok())));
        checked == Outcome::Token(1)
    };
    let broken = corpus.iter().filter(|(_, data)| !kept(data)).count();
    assert!(
        broken * 4 >= corpus.len(),
        "upstream broke only {broken} of {}",
        corpus.len()
    );
}
