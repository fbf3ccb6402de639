//! The steps as a forest plot: a panel per step (the whole series against the published crates,
//! then each patch against the point it builds on), a row per variant. Each row shows the time
//! ratio, after over before, with its 95% interval on a log axis around 1.0, over the ±1% band
//! and the range that two builds of identical code differ by (the A/A pair's, as
//! `Placement` draws it), with the instruction ratio beside it where callgrind counted.
//!
//! The plot is drawn as SVG, its columns laid out here in pixels, and rendered to PNG by resvg
//! with a font of its own, so that a pull request's description can show a step's panel on any
//! machine. Every mark is a measurement's circle or a key's bar, line or diamond, so that every
//! circle in the figure is a measurement.

use std::ops::Range;

use anyhow::{Context, Result};
use plotters::coord::combinators::WithKeyPoints;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::CoordTranslate;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::data::{Report, Step, StepRow};
use super::render::point;
use super::stats::{Placement, Verdict, Work};

/// Where `bench-report` writes every step's panel, beside the report.
pub const SVG: &str = "bench-steps.svg";
/// What `cargo xtask pr` names a step's panel in `target/pr/<branch>/`.
pub const PNG: &str = "bench.png";
/// The PNG's pixels per SVG pixel: sharp where a screen shows it at half size.
pub const PNG_SCALE: u32 = 2;

/// The figure's width, and the columns of a panel: the variants' names, the plotting area, the
/// numbers.
const WIDTH: i32 = 820;
const NAMES: i32 = 150;
const PLOT: i32 = 440;
const NUMBERS: i32 = NAMES + PLOT + 14;
/// A variant's row, a panel's title above its rows and its axis below them.
const ROW: i32 = 32;
const TITLE: i32 = 50;
const AXIS: i32 = 50;
/// The key, once, below the panels.
const KEY: i32 = 62;

const ONE: RGBColor = RGBColor(70, 70, 70);
/// The ±1% band, and the range the A/A pair explains, both translucent so that either shows
/// through the other.
const WITHIN_ONE_PERCENT: RGBAColor = RGBAColor(110, 110, 110, 0.28);
const PLACEMENT_BAND: RGBAColor = RGBAColor(240, 150, 40, 0.35);
const NEUTRAL: RGBColor = RGBColor(40, 80, 150);
const FASTER: RGBColor = RGBColor(20, 140, 60);
const SLOWER: RGBColor = RGBColor(200, 40, 40);
const INSTRUCTIONS: RGBColor = RGBColor(130, 50, 160);

/// The steps to draw, the whole series first, each panel's A/A bands from `control`.
pub fn svg(steps: &[&Step], control: &Step) -> Result<String> {
    let panels = steps
        .iter()
        .map(|step| TITLE + ROW * step.rows.len() as i32 + AXIS);
    let heights: Vec<i32> = panels.chain([KEY]).collect();
    stacked(WIDTH, &heights, |i, area| match steps.get(i) {
        Some(step) => draw_panel(area, step, control),
        None => draw_key(area),
    })
}

/// The whole series, from the same rounds and counts as the steps, as `bench_report::whole_series`
/// measures it, then every patch's step.
pub fn report_svg(report: &Report, whole: &Step) -> Result<String> {
    let steps: Vec<&Step> = std::iter::once(whole).chain(&report.patches).collect();
    svg(&steps, &report.control)
}

/// The forest plot of patch `number`'s step against `before` (`None`: the published crates), as
/// a PNG for a pull request's description; `None` where `report` did not measure that step.
pub fn step_png(
    report: Option<&Report>,
    number: &str,
    before: Option<&str>,
) -> Result<Option<Vec<u8>>> {
    let before = before.unwrap_or(shared::PUBLISHED_POINT);
    let measured = |s: &&Step| s.after == number && s.before == before && !s.rows.is_empty();
    let found = report.and_then(|r| Some((r, r.patches.iter().find(measured)?)));
    let Some((report, step)) = found else {
        return Ok(None);
    };
    Ok(Some(png(&svg(&[step], &report.control)?)?))
}

/// `svg` rendered as PNG at `PNG_SCALE`, its text in DejaVu Sans from the `dejavu` crate: no
/// font of the machine's is looked up, so the picture is the same on every machine.
pub fn png(svg: &str) -> Result<Vec<u8>> {
    use resvg::{tiny_skia, usvg};
    let mut options = usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_font_data(dejavu::sans::regular().to_vec());
    fonts.load_font_data(dejavu::sans::bold().to_vec());
    fonts.set_sans_serif_family("DejaVu Sans");
    let tree =
        usvg::Tree::from_str(svg, &options).context("the chart is not SVG that usvg reads")?;
    let size = tree.size().to_int_size();
    let (width, height) = (size.width() * PNG_SCALE, size.height() * PNG_SCALE);
    let mut pixmap = tiny_skia::Pixmap::new(width, height).context("an empty chart")?;
    let scale = PNG_SCALE as f32;
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .context("cannot encode the chart as PNG")
}

/// The ratio axis: from every value a panel draws, with 1.0 and ±1% always in view, and a margin
/// beyond the outermost so that no mark lies on the frame.
fn extent(values: impl IntoIterator<Item = f64>) -> Range<f64> {
    let (low, high) = values
        .into_iter()
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((0.98f64, 1.02f64), |(l, h), v| (l.min(v), h.max(v)));
    let margin = (high / low).ln() * 0.06;
    low * (-margin).exp()..high * margin.exp()
}

/// Round ratios within `axis`, 1.0 first and then outwards, each far enough from the last that
/// their labels do not touch.
fn ticks(axis: &Range<f64>) -> Vec<f64> {
    // 0.85 and 1.15 too: a step at 0.854 on an axis from 0.82 had no label near it.
    const ROUND: [f64; 29] = [
        0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99, 1.0, 1.01,
        1.02, 1.05, 1.1, 1.15, 1.2, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0,
    ];
    const APART: f64 = 46.0;
    // Where a ratio lies across the plotting area, in pixels.
    let x = |v: f64| (v / axis.start).ln() / (axis.end / axis.start).ln() * PLOT as f64;
    let within = |v: &&f64| axis.contains(*v);
    let mut ticks = vec![1.0];
    let below = ROUND.iter().rev().filter(|v| **v < 1.0).filter(within);
    let above = ROUND.iter().filter(|v| **v > 1.0).filter(within);
    for side in [below.collect::<Vec<_>>(), above.collect()] {
        let mut last = x(1.0);
        for &v in side {
            if (x(v) - last).abs() >= APART {
                ticks.push(v);
                last = x(v);
            }
        }
    }
    ticks.sort_by(f64::total_cmp);
    ticks
}

/// The colour of a row's marks: green where the step is faster, red where slower, blue where
/// the verdict counts no difference.
fn tone(row: &StepRow) -> RGBColor {
    let counted = row.paired.work != Some(Work::Placement);
    match row.paired.verdict() {
        Verdict::Faster if counted => FASTER,
        Verdict::Slower if counted => SLOWER,
        _ => NEUTRAL,
    }
}

fn title(step: &Step) -> (String, String) {
    let against = format!("{} against {}", point(&step.after), point(&step.before));
    match step.after.as_str() {
        shared::SERIES_POINT => ("All patches".to_string(), against),
        number => (format!("{number} {}", step.subject), against),
    }
}

/// One step's panel: its title, then a row per variant over the bands, then the axis. The
/// plotting area's height is in pixels from its top, so that a row's marks sit at its middle.
fn draw_panel(area: &Area, step: &Step, control: &Step) -> Result<()> {
    let placement = |row: &StepRow| control.paired(&row.comparison).map(Placement::of);
    let values = step.rows.iter().flat_map(|row| {
        let band = placement(row).map(|p| [p.low, p.high]);
        let (paired, instructions) = (&row.paired, row.instructions);
        [paired.low, paired.high, paired.ratio]
            .into_iter()
            .chain(instructions)
            .chain(band.into_iter().flatten())
    });
    let axis = extent(values);
    let (name, against) = title(step);
    heading(area, &name, &[against + ", after / before"])?;
    let height = (ROW * step.rows.len() as i32) as f64;
    // The axis's name 10 pixels above the panel's foot.
    let plot = area.margin(TITLE, 10, NAMES, WIDTH - NAMES - PLOT);
    let ratio = axis.clone().log_scale().with_key_points(ticks(&axis));
    let mut chart = ChartBuilder::on(&plot)
        .x_label_area_size(AXIS - 10)
        .build_cartesian_2d(ratio, height..0.0)?;
    // A light line at each tick and none between them: a log axis's lines between them would
    // crowd the marks.
    chart
        .configure_mesh()
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(TRANSPARENT)
        .label_style(text(13.0, HPos::Center, VPos::Top))
        .axis_desc_style(text(13.0, HPos::Center, VPos::Top))
        .y_labels(0)
        .x_desc("after / before, log scale")
        .x_label_formatter(&|tick| format!("{tick}"))
        .draw()?;
    let plot = chart.plotting_area();
    let band = [(0.99, 0.0), (1.01, height)];
    plot.draw(&Rectangle::new(band, WITHIN_ONE_PERCENT.filled()))?;
    for (i, row) in step.rows.iter().enumerate() {
        let row_top = f64::from(ROW * i as i32);
        if let Some(p) = placement(row) {
            let band = [
                (p.low, row_top + 5.0),
                (p.high, row_top + f64::from(ROW) - 5.0),
            ];
            plot.draw(&Rectangle::new(band, PLACEMENT_BAND.filled()))?;
        }
    }
    plot.draw(&PathElement::new([(1.0, 0.0), (1.0, height)], ONE))?;
    for (i, row) in step.rows.iter().enumerate() {
        draw_row(area, plot, row, ROW * i as i32 + ROW / 2)?;
    }
    let corners = [(axis.start, 0.0), (axis.end, height)];
    plot.draw(&Rectangle::new(corners, FRAME))?;
    Ok(())
}

/// The plotting area of a panel: ratios across, pixels down.
type Plot<'a> =
    DrawingArea<SVGBackend<'a>, Cartesian2d<WithKeyPoints<LogCoord<f64>>, RangedCoordf64>>;

/// One variant, `y` pixels down the plotting area: its name, its interval with the ratio, the
/// instruction ratio as a diamond below them, and the numbers.
fn draw_row(area: &Area, plot: &Plot, row: &StepRow, y: i32) -> Result<()> {
    let (at, y_px) = (|ratio: f64| (ratio, f64::from(y)), TITLE + y);
    let name = text(14.0, HPos::Right, VPos::Center);
    area.draw(&Text::new(
        row.comparison.clone(),
        (NAMES - 10, y_px - 1),
        name,
    ))?;
    let (paired, color) = (&row.paired, tone(row));
    draw_interval(plot, at(paired.low), at(paired.high), color)?;
    plot.draw(&Circle::new(at(paired.ratio), 4, color.filled()))?;
    let numbers = text(13.0, HPos::Left, VPos::Center);
    let Some(instructions) = row.instructions else {
        area.draw(&Text::new(paired.interval(), (NUMBERS, y_px), numbers))?;
        return Ok(());
    };
    plot.draw(&(EmptyElement::at(at(instructions)) + diamond((0, 9))))?;
    area.draw(&Text::new(paired.interval(), (NUMBERS, y_px - 7), numbers))?;
    let counted = format!("instructions {instructions:.4}");
    let counted_style = text(12.0, HPos::Left, VPos::Center).color(&INSTRUCTIONS);
    area.draw(&Text::new(counted, (NUMBERS, y_px + 8), counted_style))?;
    Ok(())
}

/// A horizontal bar from `low` to `high`, with a short cap at each end.
fn draw_interval<CT: CoordTranslate>(
    area: &DrawingArea<SVGBackend, CT>,
    low: CT::From,
    high: CT::From,
    color: RGBColor,
) -> Result<()>
where
    CT::From: Clone,
{
    let stroke = color.stroke_width(2);
    area.draw(&PathElement::new([low.clone(), high.clone()], stroke))?;
    for end in [low, high] {
        area.draw(&(EmptyElement::at(end) + PathElement::new([(0, -5), (0, 5)], stroke)))?;
    }
    Ok(())
}

/// An open diamond centred `(x, y)` pixels from where it is drawn: the instruction ratio.
fn diamond((x, y): (i32, i32)) -> PathElement<(i32, i32)> {
    let corners = [(x, y - 4), (x + 4, y), (x, y + 4), (x - 4, y), (x, y - 4)];
    PathElement::new(corners, INSTRUCTIONS.stroke_width(2))
}

/// What the bands and marks mean, in two lines below the panels.
fn draw_key(area: &Area) -> Result<()> {
    // A key's words after the 30 pixels that its mark takes.
    let label = |words: &str, (x, y): (i32, i32)| {
        let style = text(13.0, HPos::Left, VPos::Center);
        area.draw(&Text::new(words.to_string(), (x + 30, y), style))
    };
    let (left, first, second) = (10, 16, 42);
    let swatch = |x: i32, color: RGBAColor| {
        let corners = [(x + 2, first - 7), (x + 22, first + 7)];
        area.draw(&Rectangle::new(corners, color.filled()))
    };
    swatch(left, WITHIN_ONE_PERCENT)?;
    label("±1%: too small a difference to count", (left, first))?;
    let right = WIDTH / 2;
    swatch(right, PLACEMENT_BAND)?;
    label(
        "what two builds of identical code differ by (A/A)",
        (right, first),
    )?;
    draw_interval(area, (left + 2, second), (left + 22, second), NEUTRAL)?;
    let time = "time, 95% interval: green faster, red slower, blue no change counted";
    label(time, (left, second))?;
    let right = WIDTH * 2 / 3 + 20;
    area.draw(&diamond((right + 12, second)))?;
    label("instructions (callgrind)", (right, second))?;
    Ok(())
}

/// An area of a figure, in pixels from its top left corner.
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The colour of every picture's text.
const TEXT: RGBColor = RGBColor(30, 30, 30);
/// The plotting area's frame: what the marks lie within.
const FRAME: RGBColor = RGBColor(150, 150, 150);
/// The lines of an axis's ticks across the plotting area.
const GRID: RGBColor = RGBColor(228, 228, 228);

/// Every picture's text: sans-serif at `size`, anchored at `h` and `v`.
fn text(size: f64, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", size).into_font())
        .color(&TEXT)
        .pos(Pos::new(h, v))
}

/// A figure `width` pixels wide of areas `heights` high, top to bottom, each drawn by `draw`
/// with its index: as SVG text.
fn stacked(
    width: i32,
    heights: &[i32],
    mut draw: impl FnMut(usize, &Area) -> Result<()>,
) -> Result<String> {
    let mut out = String::new();
    let size = (width as u32, heights.iter().sum::<i32>() as u32);
    let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
    root.fill(&WHITE)?;
    let mut top = 0;
    for (i, &height) in heights.iter().enumerate() {
        draw(i, &root.clone().shrink((0, top), (width, height)))?;
        top += height;
    }
    root.present()?;
    drop(root);
    Ok(out)
}

/// A panel's heading at its top left: `title` in bold, then each of `lines` below it.
fn heading(area: &Area, title: &str, lines: &[String]) -> Result<()> {
    let bold = TextStyle::from(("sans-serif", 16.0, FontStyle::Bold).into_font());
    let bold = bold.color(&TEXT).pos(Pos::new(HPos::Left, VPos::Top));
    area.draw(&Text::new(title.to_string(), (10, 8), bold))?;
    for (i, line) in lines.iter().enumerate() {
        let style = text(14.0, HPos::Left, VPos::Top);
        area.draw(&Text::new(line.clone(), (10, 29 + 18 * i as i32), style))?;
    }
    Ok(())
}
