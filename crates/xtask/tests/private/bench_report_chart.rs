//! The unit tests of `bench_report/chart`, private items included.

use super::*;

#[test]
fn ticks_are_round_and_within_the_axis() {
    assert_eq!(time_ticks(21e3, 3e6), [50e3, 100e3, 200e3, 500e3, 1e6, 2e6]);
    // Less than a decade: finer steps, so that the axis still has three labels or more.
    assert_eq!(time_ticks(25e3, 60e3), [30e3, 40e3, 50e3, 60e3]);
    assert_eq!(tick_label(500e3), "500 µs");
    assert_eq!(tick_label(2e6), "2 ms");
    assert_eq!(tick_label(1.5e4), "15 µs");
}
