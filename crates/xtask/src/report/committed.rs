//! The committed report as `pr` and `check` read it: current for the patches it measured as they
//! are, and named as stale for the others.

use std::collections::BTreeMap;

use anyhow::Result;

use super::{data_path, Report, FULL_RUN, MARKDOWN};
use crate::project::{Layout, REPORT_DIR};
use crate::series::Series;

/// The sha256 of each patch file of `patches/`, by number.
pub fn patch_hashes(series: &Series) -> BTreeMap<String, String> {
    let hash = |p: &crate::series::Patch| (p.number().to_string(), shared::sha256_hex(&p.bytes));
    series.patches.iter().map(hash).collect()
}

/// The committed report, with the steps of patches changed since it was written taken out;
/// `None` where there is none. A report this `bench-report` cannot read is an error that says
/// to run it again.
pub fn committed(layout: &Layout, series: &Series) -> Result<Option<Report>> {
    let Some(mut report) = read_committed(layout)?.transpose()? else {
        return Ok(None);
    };
    report.keep_current(&patch_hashes(series));
    Ok(Some(report))
}

/// The committed report as written: `None` where there is none, and inside, a report that this
/// `bench-report` cannot read, as what to say. Fails where the file cannot be read at all.
fn read_committed(layout: &Layout) -> Result<Option<Result<Report>>> {
    let path = data_path(layout);
    let Some(text) = crate::fsutil::read_if_exists(&path)? else {
        return Ok(None);
    };
    let unreadable = |err| {
        let shown = path.display();
        anyhow::anyhow!(
            "{shown} is not what this `cargo xtask bench-report` writes ({err}): run it again"
        )
    };
    Ok(Some(Report::parse(&text).map_err(unreadable)))
}

/// What `check` says when `patches/` differs from what the committed report measured: the
/// patches, and the command that measures them again. `None` when the report is current.
pub fn staleness(layout: &Layout, series: &Series) -> Result<Option<String>> {
    let current = patch_hashes(series);
    let (unreadable, changed) = match read_committed(layout)? {
        Some(Ok(report)) => (None, report.changed(&current)),
        Some(Err(unreadable)) => (Some(unreadable), current.into_keys().collect()),
        None => (None, current.into_keys().collect()),
    };
    let unreadable = unreadable.map_or(String::new(), |err| format!("{err}\n"));
    Ok((!changed.is_empty()).then(|| {
        format!(
            "{unreadable}{REPORT_DIR}/{MARKDOWN} did not measure these patches as they are now: \
             {}. Run {FULL_RUN}, and commit {REPORT_DIR}/",
            changed.join(", "),
        )
    }))
}
