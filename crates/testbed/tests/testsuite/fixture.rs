//! What `LogitStats` counts.

use testbed::fixture::LogitStats;

#[test]
fn stats_count_what_they_say() {
    let stats = LogitStats::of(&[1.0, f32::NAN, 3.0, -2.0, f32::NEG_INFINITY, 3.0]);
    assert_eq!(
        stats,
        LogitStats {
            count: 6,
            positive: 3,
            max: 3.0,
            min: f32::NEG_INFINITY,
            nan: 1,
            inf: 1,
            argmax: 2,
        }
    );
}
