#![no_main]

// Every promise is checked in testbed::fuzz, which `cargo test` also runs on the corpus.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(finding) = testbed::fuzz::check(data) {
        panic!("{finding}");
    }
});
