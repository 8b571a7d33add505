//! `--plot FILE.png`: line charts of a run, drawn with plotters' bitmap
//! backend (pure Rust, no system libraries). Text needs a TrueType font:
//! the first of a few common Debian font files that exists is used; with
//! none, the chart is drawn without captions and labels.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

/// Font files tried in order (`fonts-dejavu-core`, `fonts-liberation`).
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

/// Whether a font could be registered (once per process).
fn have_font() -> bool {
    static FONT: OnceLock<bool> = OnceLock::new();
    *FONT.get_or_init(|| {
        for f in FONTS {
            if let Ok(bytes) = std::fs::read(f) {
                // plotters keeps registered fonts for the whole process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

/// Named lines: (name, points).
pub type Series<'a> = Vec<(&'a str, Vec<(f64, f64)>)>;

/// Draws `series` (name, points) as lines in one 1000×600 PNG chart.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, Vec<(f64, f64)>)],
) -> anyhow::Result<()> {
    panels(path, title, x_label, &[(y_label, series.to_vec())])
}

/// Draws one chart per panel, stacked, sharing the x label: for figures
/// of different scales over the same time (throughput and latency).
pub fn panels(
    path: &Path,
    title: &str,
    x_label: &str,
    panels: &[(&str, Series<'_>)],
) -> anyhow::Result<()> {
    let text = have_font();
    let height = 120 + 480 * panels.len() as u32;
    let root = BitMapBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let root = if text {
        root.titled(title, ("sans-serif", 24)).map_err(draw_err)?
    } else {
        root
    };
    let areas = root.split_evenly((panels.len().max(1), 1));
    for (area, (y_label, series)) in areas.iter().zip(panels) {
        draw_panel(area, text, x_label, y_label, series)?;
    }
    root.present().map_err(draw_err)?;
    Ok(())
}

fn draw_panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    text: bool,
    x_label: &str,
    y_label: &str,
    series: &[(&str, Vec<(f64, f64)>)],
) -> anyhow::Result<()> {
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in points {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.1 };
    let mut builder = ChartBuilder::on(area);
    builder.margin(20);
    if text {
        builder.x_label_area_size(40).y_label_area_size(70);
    }
    let mut chart = builder
        .build_cartesian_2d(x0..x1, 0.0..y1)
        .map_err(draw_err)?;
    let mut mesh = chart.configure_mesh();
    if text {
        mesh.x_desc(x_label).y_desc(y_label);
    } else {
        mesh.disable_x_mesh()
            .disable_y_mesh()
            .x_labels(0)
            .y_labels(0);
    }
    mesh.draw().map_err(draw_err)?;
    let colors = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    for (k, (name, pts)) in series.iter().enumerate() {
        let color = colors[k % colors.len()];
        let drawn = chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(draw_err)?;
        if text {
            drawn
                .label(*name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
    }
    if text && series.len() > 1 {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(draw_err)?;
    }
    Ok(())
}

fn draw_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the plot: {e:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.png");
        let pts: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, (i * i) as f64)).collect();
        line_chart(&path, "t", "x", "y", &[("a", pts.clone()), ("b", pts)]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
        // An empty chart is still a chart.
        line_chart(&path, "t", "x", "y", &[("a", vec![])]).unwrap();
        let two = vec![("a", vec![(0.0, 1.0), (1.0, 2.0)])];
        panels(&path, "t", "x", &[("y1", two.clone()), ("y2", two)]).unwrap();
        assert!(std::fs::read(&path).unwrap().starts_with(b"\x89PNG"));
    }
}
