//! What the three pictures share: a white figure of areas stacked top to bottom, a panel's
//! heading, the axes' mesh, the plotting area's frame colour, and the key's words. Every mark a picture draws is a
//! measurement's circle or a key's bar, line or diamond, never a circle, so that every circle in
//! a figure is a measurement.

use std::fmt::Debug;

use anyhow::Result;
use plotters::chart::{ChartContext, MeshStyle};
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
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

/// A key's words at `(x, y)`, after the 30 pixels that its mark takes.
pub(super) fn key_words(area: &Area, words: &str, (x, y): (i32, i32)) -> Result<()> {
    let style = text(13.0, HPos::Left, VPos::Center);
    area.draw(&Text::new(words.to_string(), (x + 30, y), style))?;
    Ok(())
}

/// A chart's mesh as every picture draws it: a light line across the plotting area at each
/// tick and none between them (a log axis's lines between them would crowd the marks), the
/// axes in the frame's colour, and labels and the axes' names in `text`.
pub(super) fn mesh<'a, 'b, X, Y>(
    chart: &'b mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
) -> MeshStyle<'a, 'b, X, Y, SVGBackend<'a>>
where
    X: Ranged<ValueType: Debug> + ValueFormatter<X::ValueType>,
    Y: Ranged<ValueType: Debug> + ValueFormatter<Y::ValueType>,
{
    let mut mesh = chart.configure_mesh();
    mesh.bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(TRANSPARENT)
        .label_style(text(13.0, HPos::Center, VPos::Top))
        .axis_desc_style(text(13.0, HPos::Center, VPos::Top));
    mesh
}

/// The least and the greatest of `values`.
pub(super) fn bounds(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    let bounds = (f64::INFINITY, f64::NEG_INFINITY);
    values
        .into_iter()
        .fold(bounds, |(l, h), v| (l.min(v), h.max(v)))
}
