//! The report's SVG chart: time per call against vocabulary, a panel per comparison (CPU rows).

use anyhow::Result;
use plotters::prelude::*;

use super::Row;

/// The lines of a panel: a name, a colour and where the value is in a row.
type Line = (&'static str, RGBColor, fn(&Row) -> Option<f64>);

const LINES: [Line; 3] = [
    ("published", RGBColor(200, 60, 40), |r| Some(r.published_ns)),
    ("series", RGBColor(40, 110, 200), |r| Some(r.series_ns)),
    ("floor", RGBColor(90, 90, 90), |r| r.floor_ns),
];

/// What the chart says when there is nothing to draw.
pub const NO_DATA: &str = "no CPU measurements: run `cargo bench`";

/// The chart of the CPU rows of `rows`, as SVG text.
pub fn svg(rows: &[Row]) -> Result<String> {
    let rows: Vec<&Row> = rows.iter().filter(|r| r.device == "cpu").collect();
    let mut comparisons: Vec<&str> = rows.iter().map(|r| r.comparison.as_str()).collect();
    comparisons.dedup();
    let mut out = String::new();
    let columns = comparisons.len().clamp(1, 4);
    let lines = comparisons.len().div_ceil(columns).max(1);
    let size = (320 * columns as u32, 260 * lines as u32);
    let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
    root.fill(&WHITE)?;
    if comparisons.is_empty() {
        root.draw(&Text::new(NO_DATA, (16, 120), ("sans-serif", 16)))?;
    }
    for (panel, comparison) in root.split_evenly((lines, columns)).iter().zip(&comparisons) {
        let points: Vec<(f64, &Row)> = rows
            .iter()
            .filter(|r| r.comparison == *comparison)
            .filter_map(|r| Some((r.vocab.parse::<f64>().ok()? / 1000.0, *r)))
            .collect();
        let highest = points
            .iter()
            .flat_map(|(_, r)| LINES.iter().filter_map(|(_, _, value)| value(r)))
            .fold(0.0, f64::max)
            / 1e6;
        let mut chart = ChartBuilder::on(panel)
            .caption(comparison, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(44)
            .build_cartesian_2d(0f64..160f64, 0f64..highest * 1.1)?;
        chart
            .configure_mesh()
            .x_desc("vocabulary (thousands)")
            .y_desc("ms per call")
            .draw()?;
        for (name, color, value) in LINES {
            let line: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|(x, r)| Some((*x, value(r)? / 1e6)))
                .collect();
            if line.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], color));
            // A mark on every measurement, so that one vocabulary alone still shows.
            chart.draw_series(line.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
    }
    root.present()?;
    drop(root);
    Ok(out)
}
