//! What the three pictures share: a white figure of areas stacked top to bottom, a panel's
//! heading, the plotting area's frame, and the key's words. Every mark a picture draws is a
//! measurement's circle or a key's bar, line or diamond, never a circle, so that every circle in
//! a figure is a measurement.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// An area of a figure, in pixels from its top left corner.
pub(super) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The colour of every picture's text.
pub(super) const TEXT: RGBColor = RGBColor(30, 30, 30);
/// The plotting area's frame: what the marks lie within.
pub(super) const FRAME: RGBColor = RGBColor(150, 150, 150);
/// The lines of an axis's ticks across the plotting area.
pub(super) const GRID: RGBColor = RGBColor(228, 228, 228);

/// Every picture's text: sans-serif at `size`, anchored at `h` and `v`.
pub(super) fn text(size: f64, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", size).into_font())
        .color(&TEXT)
        .pos(Pos::new(h, v))
}

/// A figure `width` pixels wide of areas `heights` high, top to bottom, each drawn by `draw`
/// with its index: as SVG text.
pub(super) fn stacked(
    width: u32,
    heights: &[u32],
    mut draw: impl FnMut(usize, &Area) -> Result<()>,
) -> Result<String> {
    let mut out = String::new();
    let root = SVGBackend::with_string(&mut out, (width, heights.iter().sum())).into_drawing_area();
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
pub(super) fn heading(area: &Area, title: &str, lines: &[String]) -> Result<()> {
    let bold = TextStyle::from(("sans-serif", 16.0, FontStyle::Bold).into_font());
    let bold = bold.color(&TEXT).pos(Pos::new(HPos::Left, VPos::Top));
    area.draw(&Text::new(title.to_string(), (10, 8), bold))?;
    for (i, line) in lines.iter().enumerate() {
        let style = text(14.0, HPos::Left, VPos::Top);
        area.draw(&Text::new(line.clone(), (10, 29 + 18 * i as i32), style))?;
    }
    Ok(())
}

/// The frame around the plotting area from `(left, top)` to `(right, bottom)`.
pub(super) fn frame(
    area: &Area,
    (left, top): (i32, i32),
    (right, bottom): (i32, i32),
) -> Result<()> {
    area.draw(&Rectangle::new([(left, top), (right, bottom)], FRAME))?;
    Ok(())
}

/// A key's words at `(x, y)`, after the 30 pixels that its mark takes.
pub(super) fn key_words(area: &Area, words: &str, (x, y): (i32, i32)) -> Result<()> {
    let style = text(13.0, HPos::Left, VPos::Center);
    area.draw(&Text::new(words.to_string(), (x + 30, y), style))?;
    Ok(())
}
