//! The decode loop as a strip plot: a panel per comparison, a strip per point it decoded with,
//! a dot per round at that round's milliseconds per token, and beside each strip a bar of the
//! sampler's milliseconds per token, hung from the strip's median. The forward pass's spread
//! from one generation to the next dwarfs that bar, which is why the decode loop's verdict
//! counts the sampler's time alone.
//!
//! Drawn as SVG in pixels laid out here, as the forest plot is, so that `forest::png` renders it.

use anyhow::{Context, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::chart::{point, tick_label, PUBLISHED, SERIES};
use super::frame::{self, key_words, text, Area, GRID, TEXT};
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
    let heights: Vec<u32> = (loops.iter().map(|_| PANEL).chain([KEY]))
        .map(|h| h as u32)
        .collect();
    frame::stacked(width as u32, &heights, |i, area| match loops.get(i) {
        Some(decode) => draw_panel(area, decode, width - LEFT - RIGHT),
        None => draw_key(area),
    })
}

/// A strip: its point, its rounds, and what its dots and bar are drawn from.
struct Strip {
    point: String,
    rounds: Vec<(f64, f64)>,
    /// The median round's ms per token, the sampler's median ms per token and median share.
    median: f64,
    sampler: f64,
    share: f64,
}

impl Strip {
    fn of(decode: &Loop, point: &str) -> Result<Strip> {
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

/// A linear axis of ms per token up the plotting area: where a time lies, in pixels.
struct Axis {
    low: f64,
    high: f64,
    top: i32,
}

impl Axis {
    /// From every round and every bar's foot, with a margin beyond them so that no dot touches
    /// the frame.
    fn of(strips: &[Strip], top: i32) -> Axis {
        let values = strips.iter().flat_map(|s| {
            let rounds = s.rounds.iter().map(|r| r.0);
            rounds.chain([s.median - s.sampler])
        });
        let (low, high) = values.fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
        let margin = ((high - low) * 0.08).max(high * 0.01);
        Axis {
            low: low - margin,
            high: high + margin,
            top,
        }
    }

    fn y(&self, ms: f64) -> i32 {
        let share = (self.high - ms) / (self.high - self.low);
        self.top + (share * PLOT as f64).round() as i32
    }

    /// Round times within the axis: 1, 2 or 5 times a power of ten apart, at most seven.
    fn ticks(&self) -> Vec<f64> {
        let range = self.high - self.low;
        let decade = 10f64.powf((range / 7.0).log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .map(|s| s * decade)
            .into_iter()
            .find(|step| range / step <= 7.0)
            .unwrap_or(10.0 * decade);
        let first = (self.low / step).ceil() as i64;
        let last = (self.high / step).floor() as i64;
        (first..=last).map(|i| i as f64 * step).collect()
    }
}

/// One comparison's panel: its title, the axis, then a strip per point with its bar.
fn draw_panel(area: &Area, decode: &Loop, width: i32) -> Result<()> {
    let strips =
        (decode.points.iter().map(|p| Strip::of(decode, p))).collect::<Result<Vec<_>>>()?;
    let axis = Axis::of(&strips, TITLE);
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
    let (left, right, top, bottom) = (LEFT, LEFT + width, TITLE, TITLE + PLOT);
    for tick in axis.ticks() {
        let y = axis.y(tick);
        area.draw(&PathElement::new([(left, y), (right, y)], GRID))?;
        let label = text(13.0, HPos::Right, VPos::Center);
        area.draw(&Text::new(tick_label(tick * 1e6), (left - 8, y), label))?;
    }
    let name = text(13.0, HPos::Center, VPos::Center).transform(FontTransform::Rotate270);
    area.draw(&Text::new("ms per token", (16, (top + bottom) / 2), name))?;
    let column = width / strips.len() as i32;
    for (i, strip) in strips.iter().enumerate() {
        let middle = left + column * i as i32 + column / 2;
        draw_strip(area, &axis, strip, middle, column)?;
    }
    frame::frame(area, (left, top), (right, bottom))
}

/// A strip centred on `middle`: a dot per round, left to right in the order the rounds ran, the
/// median across them, and the sampler's bar hung from the median beside them; below the
/// plotting area, its point and numbers.
fn draw_strip(area: &Area, axis: &Axis, strip: &Strip, middle: i32, column: i32) -> Result<()> {
    let n = strip.rounds.len().max(1) as i32;
    // The rounds as far apart as the column lets them be, up to `ROUND_STEP`.
    let step = ((column - 2 * DOT - GAP - BAR - 40) / n).clamp(1, ROUND_STEP);
    let group = step * (n - 1) + GAP + BAR;
    let first = middle - group / 2;
    let last = first + step * (n - 1);
    let (bar_left, bar_right) = (last + GAP, last + GAP + BAR);
    let median = axis.y(strip.median);
    // The bar at least a pixel high, so that a share too small to draw is still seen.
    let foot = axis.y(strip.median - strip.sampler).max(median + 1);
    let color = strip.color();
    let line = [(first - 2 * DOT, median), (bar_right, median)];
    area.draw(&PathElement::new(line, color.stroke_width(2)))?;
    let bar = [(bar_left, median), (bar_right, foot)];
    area.draw(&Rectangle::new(bar, SAMPLER.filled()))?;
    for (i, (ms, _)) in strip.rounds.iter().enumerate() {
        let x = first + step * i as i32;
        area.draw(&Circle::new((x, axis.y(*ms)), DOT, color.filled()))?;
    }
    let below = TITLE + PLOT;
    let (low, high) = strip
        .rounds
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(l, h), r| {
            (l.min(r.0), h.max(r.0))
        });
    let lines = [
        point(&strip.point),
        format!(
            "rounds {low:.1} to {high:.1} ms, median {:.1}",
            strip.median
        ),
        format!(
            "sampler {:.2} ms a token ({:.1}%)",
            strip.sampler,
            strip.share * 100.0
        ),
    ];
    for (i, line) in lines.into_iter().enumerate() {
        let style = text(if i == 0 { 14.0 } else { 12.0 }, HPos::Center, VPos::Top);
        let style = if i == 0 { style.color(&color) } else { style };
        area.draw(&Text::new(line, (middle, below + 8 + 18 * i as i32), style))?;
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
