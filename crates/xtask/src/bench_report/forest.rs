//! The steps as a forest plot: a panel per step (the whole series against the published crates,
//! then each patch against the point it builds on), a row per variant. Each row shows the time
//! ratio, after over before, with its 95% interval on a log axis around 1.0, over the ±1% band
//! and the range that two builds of identical code differ by (the A/A pair's, as
//! `Placement` draws it), with the instruction ratio beside it where callgrind counted.
//!
//! The plot is drawn as SVG, in pixels laid out here, and rendered to PNG by resvg with a font
//! of its own, so that a pull request's description can show a step's panel on any machine.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use fs_err as fs;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::chart::point;
use super::data::{PatchStep, Report, Step};
use super::frame::{self, key_words, text, Area, GRID};
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
pub fn svg(steps: &[&PatchStep], control: &PatchStep) -> Result<String> {
    let panels = steps
        .iter()
        .map(|step| TITLE + ROW * step.rows.len() as i32 + AXIS);
    let heights: Vec<u32> = panels.chain([KEY]).map(|h| h as u32).collect();
    frame::stacked(WIDTH as u32, &heights, |i, area| match steps.get(i) {
        Some(step) => draw_panel(area, step, control),
        None => draw_key(area),
    })
}

/// The whole series, from the same rounds and counts as the steps, as `bench_report::whole_series`
/// measures it, then every patch's step.
pub fn report_svg(report: &Report, whole: &PatchStep) -> Result<String> {
    let steps: Vec<&PatchStep> = std::iter::once(whole).chain(&report.patches).collect();
    svg(&steps, &report.control)
}

/// The step of patch `number` against `before` (a patch's number, or `None` for the published
/// crates), as `report` measured it: none where it did not, or measured it against another
/// point, as a pull request's body says.
pub fn step<'a>(report: &'a Report, number: &str, before: Option<&str>) -> Option<&'a PatchStep> {
    let before = before.unwrap_or(shared::PUBLISHED_POINT);
    let step = report.patches.iter().find(|s| s.patch == number)?;
    (step.before == before && !step.rows.is_empty()).then_some(step)
}

/// Writes patch `number`'s panel as `dir/bench.png` for its pull request, where `report` (the
/// bench report, if one was written) measured that step; returns where it wrote it.
pub fn write_step_png(
    report: Option<&Report>,
    number: &str,
    before: Option<&str>,
    dir: &Path,
) -> Result<Option<PathBuf>> {
    let Some((report, step)) = report.and_then(|r| Some((r, step(r, number, before)?))) else {
        return Ok(None);
    };
    let path = dir.join(PNG);
    fs::write(&path, png(&svg(&[step], &report.control)?)?)?;
    Ok(Some(path))
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

/// A log axis of ratios across the plotting area: where a ratio lies, in pixels.
#[derive(Clone, Copy, Debug)]
struct Axis {
    low: f64,
    high: f64,
}

impl Axis {
    /// From every value a panel draws, with 1.0 and ±1% always in view, and a margin beyond the
    /// outermost so that no mark lies on the frame.
    fn of(values: impl IntoIterator<Item = f64>) -> Axis {
        let (low, high) = values
            .into_iter()
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold((0.98f64, 1.02f64), |(l, h), v| (l.min(v), h.max(v)));
        let margin = (high / low).ln() * 0.06;
        Axis {
            low: low * (-margin).exp(),
            high: high * margin.exp(),
        }
    }

    fn x(&self, ratio: f64) -> i32 {
        let share = (ratio / self.low).ln() / (self.high / self.low).ln();
        NAMES + (share * PLOT as f64).round() as i32
    }

    /// Round ratios within the axis, 1.0 first and then outwards, each far enough from the last
    /// that their labels do not touch.
    fn ticks(&self) -> Vec<f64> {
        // 0.85 and 1.15 too: a step at 0.854 on an axis from 0.82 had no label near it.
        const ROUND: [f64; 29] = [
            0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99, 1.0, 1.01,
            1.02, 1.05, 1.1, 1.15, 1.2, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0,
        ];
        const APART: i32 = 46;
        let within = |v: &&f64| (self.low..=self.high).contains(*v);
        let mut ticks = vec![1.0];
        let below = ROUND.iter().rev().filter(|v| **v < 1.0).filter(within);
        let above = ROUND.iter().filter(|v| **v > 1.0).filter(within);
        for side in [below.collect::<Vec<_>>(), above.collect()] {
            let mut last = self.x(1.0);
            for &v in side {
                if (self.x(v) - last).abs() >= APART {
                    ticks.push(v);
                    last = self.x(v);
                }
            }
        }
        ticks.sort_by(f64::total_cmp);
        ticks
    }
}

/// The colour of a row's marks: green where the step is faster, red where slower, blue where
/// the verdict counts no difference.
fn tone(row: &Step) -> RGBColor {
    let counted = row.paired.work != Some(Work::Placement);
    match row.paired.verdict() {
        Verdict::Faster if counted => FASTER,
        Verdict::Slower if counted => SLOWER,
        _ => NEUTRAL,
    }
}

fn title(step: &PatchStep) -> (String, String) {
    let against = format!("{} against {}", point(&step.patch), point(&step.before));
    match step.patch.as_str() {
        shared::SERIES_POINT => ("All patches".to_string(), against),
        number => (format!("{number} {}", step.subject), against),
    }
}

/// One step's panel: its title, then a row per variant over the bands, then the axis.
fn draw_panel(area: &Area, step: &PatchStep, control: &PatchStep) -> Result<()> {
    let placement = |row: &Step| control.paired(&row.comparison).map(Placement::of);
    let values = step.rows.iter().flat_map(|row| {
        let band = placement(row).map(|p| [p.low, p.high]);
        let (paired, instructions) = (&row.paired, row.instructions);
        [paired.low, paired.high, paired.ratio]
            .into_iter()
            .chain(instructions)
            .chain(band.into_iter().flatten())
    });
    let axis = Axis::of(values);
    let (heading, against) = title(step);
    frame::heading(area, &heading, &[against + ", after / before"])?;
    let (top, bottom) = (TITLE, TITLE + ROW * step.rows.len() as i32);
    let (left, right) = (NAMES, NAMES + PLOT);
    let ticks = axis.ticks();
    for &tick in &ticks {
        let x = axis.x(tick);
        area.draw(&PathElement::new([(x, top), (x, bottom)], GRID))?;
    }
    let band = [(axis.x(0.99), top), (axis.x(1.01), bottom)];
    area.draw(&Rectangle::new(band, WITHIN_ONE_PERCENT.filled()))?;
    for (i, row) in step.rows.iter().enumerate() {
        let row_top = top + ROW * i as i32;
        if let Some(p) = placement(row) {
            let corners = [
                (axis.x(p.low), row_top + 5),
                (axis.x(p.high), row_top + ROW - 5),
            ];
            area.draw(&Rectangle::new(corners, PLACEMENT_BAND.filled()))?;
        }
    }
    let one = axis.x(1.0);
    area.draw(&PathElement::new([(one, top), (one, bottom)], ONE))?;
    for (i, row) in step.rows.iter().enumerate() {
        draw_row(area, &axis, row, top + ROW * i as i32 + ROW / 2)?;
    }
    frame::frame(area, (left, top), (right, bottom))?;
    for tick in ticks {
        let label = text(13.0, HPos::Center, VPos::Top);
        area.draw(&Text::new(
            format!("{tick}"),
            (axis.x(tick), bottom + 6),
            label,
        ))?;
    }
    let name = text(13.0, HPos::Center, VPos::Top);
    let middle = (left + right) / 2;
    let axis_name = "after / before, log scale";
    area.draw(&Text::new(axis_name, (middle, bottom + 26), name))?;
    Ok(())
}

/// One variant: its name, its interval with the ratio, the instruction ratio as a diamond below
/// them, and the numbers.
fn draw_row(area: &Area, axis: &Axis, row: &Step, y: i32) -> Result<()> {
    let name = text(14.0, HPos::Right, VPos::Center);
    area.draw(&Text::new(
        row.comparison.clone(),
        (NAMES - 10, y - 1),
        name,
    ))?;
    let (paired, color) = (&row.paired, tone(row));
    draw_interval(area, (axis.x(paired.low), axis.x(paired.high)), y, color)?;
    area.draw(&Circle::new((axis.x(paired.ratio), y), 4, color.filled()))?;
    let numbers = text(13.0, HPos::Left, VPos::Center);
    let Some(instructions) = row.instructions else {
        area.draw(&Text::new(paired.interval(), (NUMBERS, y), numbers))?;
        return Ok(());
    };
    draw_diamond(area, (axis.x(instructions), y + 9))?;
    area.draw(&Text::new(paired.interval(), (NUMBERS, y - 7), numbers))?;
    let counted = format!("instructions {instructions:.4}");
    let counted_style = text(12.0, HPos::Left, VPos::Center).color(&INSTRUCTIONS);
    area.draw(&Text::new(counted, (NUMBERS, y + 8), counted_style))?;
    Ok(())
}

/// A horizontal bar from `x.0` to `x.1` at `y`, with a short cap at each end.
fn draw_interval(area: &Area, (low, high): (i32, i32), y: i32, color: RGBColor) -> Result<()> {
    let stroke = color.stroke_width(2);
    area.draw(&PathElement::new([(low, y), (high, y)], stroke))?;
    for x in [low, high] {
        area.draw(&PathElement::new([(x, y - 5), (x, y + 5)], stroke))?;
    }
    Ok(())
}

/// An open diamond centred on `(x, y)`: the instruction ratio.
fn draw_diamond(area: &Area, (x, y): (i32, i32)) -> Result<()> {
    let corners = [(x, y - 4), (x + 4, y), (x, y + 4), (x - 4, y), (x, y - 4)];
    area.draw(&PathElement::new(corners, INSTRUCTIONS.stroke_width(2)))?;
    Ok(())
}

/// What the bands and marks mean, in two lines below the panels.
fn draw_key(area: &Area) -> Result<()> {
    let label = |words: &str, at: (i32, i32)| key_words(area, words, at);
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
    draw_interval(area, (left + 2, left + 22), second, NEUTRAL)?;
    let time = "time, 95% interval: green faster, red slower, blue no change counted";
    label(time, (left, second))?;
    let right = WIDTH * 2 / 3 + 20;
    draw_diamond(area, (right + 12, second))?;
    label("instructions (callgrind)", (right, second))?;
    Ok(())
}
