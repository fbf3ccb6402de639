//! The unit tests of `pr/summary`.

use xtask::cherry_pick::{Stop, Stopped, Tried, Why};
use xtask::pr::summary::*;
use xtask::series::Patch;

#[test]
fn the_last_error_names_each_conflicting_patch() {
    let stopped = |name: &str, why: Stop| Stopped {
        patch: Patch {
            file_name: name.to_string(),
            bytes: Vec::new(),
            message: Default::default(),
        },
        why,
        carried: false,
    };
    let one = [
        stopped(
            "0001-a.patch",
            Stop::PassedOver(vec![(Tried::AsWritten, Why::DoesNotBuild)]),
        ),
        stopped("0002-b.patch", Stop::BuildsOn("0001".into())),
    ];
    assert_eq!(
        conflicts(&one).as_deref(),
        Some(
            "0001-a.patch conflicts with the base, so neither it nor a patch that builds on \
             it got a branch (above): redo it as said there, then run pr again"
        )
    );
    let two = [
        one[0].clone(),
        stopped(
            "0003-c.patch",
            Stop::PassedOver(vec![(Tried::AsWritten, Why::DoesNotBuild)]),
        ),
    ];
    assert!(conflicts(&two)
        .unwrap()
        .starts_with("0001-a.patch, 0003-c.patch conflict with the base, so none of them"));
    assert_eq!(conflicts(&one[1..]), None);
}
