//! The unit tests of `bench_report/criterion`, private items included.

use super::*;

#[test]
fn only_the_new_runs_are_read() -> Result<()> {
    let temp = tempfile::tempdir()?;
    let benchmark = r#"{"group_id": "cpu_argmax", "function_id": "series", "value_str": "32000"}"#;
    for (run, time) in [("new", 30.0), ("base", 90.0)] {
        let dir = temp.path().join("cpu_argmax/series/32000").join(run);
        fs::create_dir_all(&dir)?;
        fs::write(dir.join("benchmark.json"), benchmark)?;
        let sample = format!(
            r#"{{"iters": [1.0, 2.0], "times": [{time}, {}]}}"#,
            2.0 * time
        );
        fs::write(dir.join("sample.json"), sample)?;
    }
    let read = read_criterion(temp.path())?;
    assert_eq!(
        read,
        [Measurement {
            group: "cpu_argmax".into(),
            function: "series".into(),
            value: Some("32000".into()),
            median_ns: 30.0,
        }]
    );
    Ok(())
}
