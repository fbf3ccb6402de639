//! The report's SVG chart: time per call against vocabulary, a panel per comparison (CPU rows).
//!
//! Every mark must stay visible: the legend sits in a strip of its own above the panels, not
//! over a plotting area, and each axis reaches past the outermost marks. Time is on a log axis,
//! since top-p's sides differ tenfold and a linear axis would press the fast side onto the floor.

use std::ops::Range;

use anyhow::Result;
use plotters::prelude::*;

use super::frame::{self, key_words, Area, FRAME};
use super::Row;

/// Where `bench-report` writes the chart, beside the report.
pub const SVG: &str = "bench-scaling.svg";

/// The lines of a panel: a name, a colour, its marks' radius and where the value is in a row.
type Line = (&'static str, RGBColor, u32, fn(&Row) -> Option<f64>);

/// Each line's marks are smaller than the line's before, and drawn after them, so that where two
/// sides take the same time both marks still show, one as a ring around the other.
const LINES: [Line; 3] = [
    ("published", PUBLISHED, 5, |r| Some(r.published_ns)),
    ("series", SERIES, 3, |r| Some(r.series_ns)),
    ("floor", RGBColor(90, 90, 90), 2, |r| r.floor_ns),
];

/// The published point's colour and the series', here and in the decode loop's strips.
pub const PUBLISHED: RGBColor = RGBColor(200, 60, 40);
pub const SERIES: RGBColor = RGBColor(40, 110, 200);

/// What the chart says when there is nothing to draw.
pub const NO_DATA: &str = "no CPU measurements: run `cargo bench`";

/// What a point is, in words.
pub(crate) fn point(name: &str) -> String {
    match name {
        shared::PUBLISHED_POINT => "the published crates".to_string(),
        shared::SERIES_POINT => "the whole series".to_string(),
        number => format!("the branch of {number}"),
    }
}

/// One panel's size in pixels.
const PANEL: (i32, i32) = (320, 260);
/// The strip above the panels that holds the legend.
const LEGEND_HEIGHT: i32 = 30;
/// The vocabulary axis in thousands: past the largest vocabulary (151936), room for its mark.
const VOCAB: Range<f64> = 0.0..170.0;
/// How far past the fastest and the slowest mark the time axis reaches, as a factor, so that no
/// mark lies on the plotting area's edge.
const HEADROOM: f64 = 1.5;

/// The chart of the CPU rows of `rows`, as SVG text.
pub fn svg(rows: &[Row]) -> Result<String> {
    let rows: Vec<&Row> = rows.iter().filter(|r| r.device == "cpu").collect();
    let mut comparisons: Vec<&str> = rows.iter().map(|r| r.comparison.as_str()).collect();
    comparisons.dedup();
    // The legend, then the panels in lines of up to four.
    let columns = comparisons.len().clamp(1, 4);
    let lines: Vec<&[&str]> = comparisons.chunks(columns).collect();
    let heights: Vec<i32> = [LEGEND_HEIGHT]
        .into_iter()
        .chain(vec![PANEL.1; lines.len().max(1)])
        .collect();
    frame::stacked(PANEL.0 * columns as i32, &heights, |i, area| {
        if comparisons.is_empty() {
            // No legend: the words stand where the first panel would.
            if i == 1 {
                area.draw(&Text::new(NO_DATA, (16, 90), ("sans-serif", 16)))?;
            }
            return Ok(());
        }
        let Some(line) = i.checked_sub(1).map(|line| lines[line]) else {
            return draw_legend(area);
        };
        for (area, comparison) in area.split_evenly((1, columns)).iter().zip(line) {
            let points: Vec<(f64, &Row)> = rows
                .iter()
                .filter(|r| r.comparison == *comparison)
                .filter_map(|r| Some((r.vocab.parse::<f64>().ok()? / 1000.0, *r)))
                .collect();
            draw_panel(area, comparison, &points)?;
        }
        Ok(())
    })
}

/// Each line's colour and name side by side, centred in `area`, in the words of the other
/// pictures' keys. A legend entry is a stroke alone, without a mark, so that every circle in the
/// chart is a measurement.
fn draw_legend(area: &Area) -> Result<()> {
    const ENTRY: i32 = 110;
    let (width, height) = area.dim_in_pixel();
    let start = (width as i32 - ENTRY * LINES.len() as i32) / 2;
    let middle = height as i32 / 2;
    for (i, (name, color, _, _)) in LINES.iter().enumerate() {
        let x = start + ENTRY * i as i32;
        let stroke = vec![(x, middle), (x + 22, middle)];
        area.draw(&PathElement::new(stroke, color.stroke_width(2)))?;
        key_words(area, name, (x, middle))?;
    }
    Ok(())
}

/// One comparison's panel: each line through its points (vocabulary in thousands, time in ns).
fn draw_panel(area: &Area, comparison: &str, points: &[(f64, &Row)]) -> Result<()> {
    let values = points
        .iter()
        .flat_map(|(_, r)| LINES.iter().filter_map(|(_, _, _, value)| value(r)));
    let (fastest, slowest) = frame::bounds(values);
    if !(fastest > 0.0 && slowest.is_finite()) {
        return Ok(());
    }
    let (low, high) = (fastest / HEADROOM, slowest * HEADROOM);
    let time = (low..high)
        .log_scale()
        .with_key_points(time_ticks(low, high));
    let mut chart = ChartBuilder::on(area)
        .caption(comparison, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(VOCAB, time)?;
    frame::mesh(&mut chart)
        .x_desc("vocabulary (thousands)")
        .y_desc("time per call")
        .x_labels(4)
        .x_label_formatter(&|thousands| format!("{thousands:.0}"))
        .y_label_formatter(&|ns| tick_label(*ns))
        .draw()?;
    let corners = [(VOCAB.start, low), (VOCAB.end, high)];
    chart.draw_series([Rectangle::new(corners, FRAME)])?;
    for (_, color, radius, value) in LINES {
        let line: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|(x, r)| Some((*x, value(r)?)))
            .collect();
        chart.draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?;
        // A mark on every measurement, so that one vocabulary alone still shows.
        let mark = |p| Circle::new(p, radius, color.filled());
        chart.draw_series(line.into_iter().map(mark))?;
    }
    Ok(())
}

/// The time axis's ticks in ns: 1, 2 and 5 times a power of ten between `low` and `high`, or,
/// where those are fewer than three, finer steps of each decade.
fn time_ticks(low: f64, high: f64) -> Vec<f64> {
    let within = |steps: &[f64]| -> Vec<f64> {
        let decades = low.log10().floor() as i32..=high.log10().ceil() as i32;
        let all = decades.flat_map(|d| steps.iter().map(move |s| s * 10f64.powi(d)));
        all.filter(|v| (low..=high).contains(v)).collect()
    };
    let coarse = within(&[1.0, 2.0, 5.0]);
    match coarse.len() {
        0..=2 => within(&[1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0]),
        _ => coarse,
    }
}

/// A tick's time, "500 µs" or "2 ms": ticks are round, so no more digits than they have.
pub(super) fn tick_label(ns: f64) -> String {
    let round = |v: f64| (v * 1000.0).round() / 1000.0;
    match ns {
        ns if ns >= 1e6 => format!("{} ms", round(ns / 1e6)),
        ns if ns >= 1e3 => format!("{} µs", round(ns / 1e3)),
        ns => format!("{} ns", round(ns)),
    }
}

#[cfg(test)]
#[path = "../../tests/private/bench_report_chart.rs"]
mod tests;
