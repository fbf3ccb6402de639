//! The decode loop as a strip plot: a panel per comparison, a strip per point it decoded with,
//! a dot per round at that round's milliseconds per token, and beside each strip a bar of the
//! sampler's milliseconds per token, hung from the strip's median. The forward pass's spread
//! from one generation to the next dwarfs that bar, which is why the decode loop's verdict
//! counts the sampler's time alone.
//!
//! Drawn as SVG, its strips laid out here in pixels, as the forest plot is, so that
//! `forest::png` renders it.

use anyhow::{Context, Result};
use plotters::coord::types::{RangedCoordf64, RangedCoordi32};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::chart::{point, tick_label, PUBLISHED, SERIES};
use super::frame::{self, key_words, text, Area, FRAME, TEXT};
use super::stats::median;
use shared::{PUBLISHED_POINT, SERIES_POINT};

/// Where `bench-report` writes the strip plot, beside the report, when the decode loop ran.
pub const SVG: &str = "bench-decode.svg";

/// One comparison's decode loop as `bench-driver decode` timed it: per round, each point's total
/// time and its sampler's time, in ns, for `tokens` tokens, two columns per point in `points`'
/// order.
#[derive(Clone, Debug, PartialEq)]
pub struct Loop {
    pub comparison: String,
    pub points: Vec<String>,
    pub tokens: u64,
    pub rounds: Vec<Vec<f64>>,
}

impl Loop {
    /// `point`'s rounds in the order they ran: (ms per token, the sampler's ms per token).
    pub fn per_token(&self, point: &str) -> Result<Vec<(f64, f64)>> {
        let i = self.points.iter().position(|p| p == point);
        let i = 2 * i.with_context(|| format!("the decode loop did not run the point {point}"))?;
        let ms = |ns: f64| ns / self.tokens as f64 / 1e6;
        Ok(self
            .rounds
            .iter()
            .map(|r| (ms(r[i]), ms(r[i + 1])))
            .collect())
    }
}

/// The figure's margins and a strip's column: the time axis's labels left of the plotting area,
/// each strip's name and numbers below it.
const LEFT: i32 = 90;
const RIGHT: i32 = 20;
const COLUMN: i32 = 230;
/// A panel's title above its plotting area, the plotting area, and the strips' names below it.
const TITLE: i32 = 72;
const PLOT: i32 = 280;
const BELOW: i32 = 66;
const PANEL: i32 = TITLE + PLOT + BELOW;
/// The key, once, below the panels.
const KEY: i32 = 52;
/// A round's dot, the most pixels between two rounds' dots, and the sampler's bar beside them.
const DOT: i32 = 4;
const ROUND_STEP: i32 = 11;
const GAP: i32 = 12;
const BAR: i32 = 10;

const SAMPLER: RGBColor = RGBColor(30, 30, 30);
const BRANCH: RGBColor = RGBColor(20, 140, 60);

/// Every comparison's panel, one below the other, as SVG text.
pub fn svg(loops: &[Loop]) -> Result<String> {
    let widest = loops
        .iter()
        .map(|l| l.points.len())
        .max()
        .unwrap_or(1)
        .max(2);
    let width = LEFT + COLUMN * widest as i32 + RIGHT;
    let heights: Vec<i32> = loops.iter().map(|_| PANEL).chain([KEY]).collect();
    frame::stacked(width, &heights, |i, area| match loops.get(i) {
        Some(decode) => draw_panel(area, decode, width - LEFT - RIGHT),
        None => draw_key(area),
    })
}

/// A strip, one side of the decode loop: its point, its rounds, and the medians that its dots and
/// bar are drawn from and the decode tables give.
pub(super) struct Strip {
    point: String,
    pub(super) rounds: Vec<(f64, f64)>,
    /// The median round's ms per token, the sampler's median ms per token and median share.
    pub(super) median: f64,
    sampler: f64,
    pub(super) share: f64,
}

impl Strip {
    pub(super) fn of(decode: &Loop, point: &str) -> Result<Strip> {
        let rounds = decode.per_token(point)?;
        Ok(Strip {
            point: point.to_string(),
            median: median(rounds.iter().map(|r| r.0)),
            sampler: median(rounds.iter().map(|r| r.1)),
            share: median(rounds.iter().map(|(ms, sampler)| sampler / ms)),
            rounds,
        })
    }

    fn color(&self) -> RGBColor {
        match self.point.as_str() {
            PUBLISHED_POINT => PUBLISHED,
            SERIES_POINT => SERIES,
            _ => BRANCH,
        }
    }
}

/// The plotting area of a panel: pixels across, so that the strips are laid out in pixels, and
/// ms per token up.
type Plot<'a> = DrawingArea<SVGBackend<'a>, Cartesian2d<RangedCoordi32, RangedCoordf64>>;

/// One comparison's panel: its title, the axis, then a strip per point with its bar.
fn draw_panel(area: &Area, decode: &Loop, width: i32) -> Result<()> {
    let strips =
        (decode.points.iter().map(|p| Strip::of(decode, p))).collect::<Result<Vec<_>>>()?;
    // Every round and every bar's foot, with a margin beyond them so that no dot touches the
    // frame.
    let values = strips.iter().flat_map(|s| {
        let rounds = s.rounds.iter().map(|r| r.0);
        rounds.chain([s.median - s.sampler])
    });
    let (low, high) = frame::bounds(values);
    let margin = ((high - low) * 0.08).max(high * 0.01);
    let ms = low - margin..high + margin;
    let (tokens, rounds) = (decode.tokens, decode.rounds.len());
    let mut subtitle = vec![format!(
        "{rounds} rounds, each generating {tokens} tokens once per side, in turn"
    )];
    // What the table's verdict reads from the same rounds: the whole token's ratio, then the
    // sampler's time alone.
    if let Ok(whole) = super::decode_between(decode, PUBLISHED_POINT, SERIES_POINT) {
        subtitle.push(format!(
            "series / published per token {}; sampler's time only {}: {}",
            whole.per_token.interval(),
            whole.sampler_only.interval(),
            whole.sampler_only.verdict_text()
        ));
    }
    frame::heading(area, &decode.comparison, &subtitle)?;
    // The axis's name 8 pixels in from the figure's edge.
    let mut chart = ChartBuilder::on(&area.margin(TITLE, BELOW, 8, RIGHT))
        .y_label_area_size(LEFT - 8)
        .build_cartesian_2d(0..width, ms.clone())?;
    // Round times within the axis: 1, 2 or 5 times a power of ten apart, at most seven.
    frame::mesh(&mut chart)
        .disable_x_mesh()
        .y_labels(7)
        .y_desc("ms per token")
        .y_label_formatter(&|ms| tick_label(ms * 1e6))
        .draw()?;
    let plot = chart.plotting_area();
    let column = width / strips.len() as i32;
    for (i, strip) in strips.iter().enumerate() {
        draw_strip(area, plot, strip, column * i as i32 + column / 2, column)?;
    }
    plot.draw(&Rectangle::new([(0, ms.start), (width, ms.end)], FRAME))?;
    Ok(())
}

/// A strip centred `middle` pixels across the plotting area: a dot per round, left to right in
/// the order the rounds ran, the median across them, and the sampler's bar hung from the median
/// beside them; below the plotting area, its point and numbers.
fn draw_strip(area: &Area, plot: &Plot, strip: &Strip, middle: i32, column: i32) -> Result<()> {
    let n = strip.rounds.len().max(1) as i32;
    // The rounds as far apart as the column lets them be, up to `ROUND_STEP`.
    let step = ((column - 2 * DOT - GAP - BAR - 40) / n).clamp(1, ROUND_STEP);
    let group = step * (n - 1) + GAP + BAR;
    let first = middle - group / 2;
    let last = first + step * (n - 1);
    let (bar_left, bar_right) = (last + GAP, last + GAP + BAR);
    let median = strip.median;
    // The bar at least a pixel high, so that a share too small to draw is still seen.
    let ms = plot.as_coord_spec().y_spec().range();
    let foot = (median - strip.sampler).min(median - (ms.end - ms.start) / f64::from(PLOT));
    let color = strip.color();
    let line = [(first - 2 * DOT, median), (bar_right, median)];
    plot.draw(&PathElement::new(line, color.stroke_width(2)))?;
    let bar = [(bar_left, median), (bar_right, foot)];
    plot.draw(&Rectangle::new(bar, SAMPLER.filled()))?;
    for (i, (ms, _)) in strip.rounds.iter().enumerate() {
        let x = first + step * i as i32;
        plot.draw(&Circle::new((x, *ms), DOT, color.filled()))?;
    }
    let (low, high) = frame::bounds(strip.rounds.iter().map(|r| r.0));
    let lines = [
        point(&strip.point),
        format!("rounds {low:.1} to {high:.1} ms, median {median:.1}"),
        format!(
            "sampler {:.2} ms a token ({:.1}%)",
            strip.sampler,
            strip.share * 100.0
        ),
    ];
    for (i, line) in lines.into_iter().enumerate() {
        let style = text(if i == 0 { 14.0 } else { 12.0 }, HPos::Center, VPos::Top);
        let style = if i == 0 { style.color(&color) } else { style };
        let at = (LEFT + middle, TITLE + PLOT + 8 + 18 * i as i32);
        area.draw(&Text::new(line, at, style))?;
    }
    Ok(())
}

/// What the dots, the line and the bar are, in two lines below the panels.
fn draw_key(area: &Area) -> Result<()> {
    let (left, first, second) = (10, 14, 36);
    let label = |words: &str, y: i32| key_words(area, words, (left, y));
    let line = [(left + 2, first), (left + 22, first)];
    area.draw(&PathElement::new(line, TEXT.stroke_width(2)))?;
    label(
        "dots: each round's ms per token, left to right as the rounds ran; line: their median",
        first,
    )?;
    let bar = [(left + 8, second - 7), (left + 16, second + 7)];
    area.draw(&Rectangle::new(bar, SAMPLER.filled()))?;
    label(
        "the sampler's ms per token (median), hung from the median: the most a faster \
         sampler could save",
        second,
    )?;
    Ok(())
}
