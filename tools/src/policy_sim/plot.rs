//! The SVG plot of a run (plotters, SVG backend only): each group's utilisation, and its
//! share of new connections (as the device forwarded them, and as the tables serve them), over
//! virtual time, with the health events marked.

use super::engine::Outcome;
use super::scenario::MICROS;
use plotters::prelude::*;

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 820;

/// Colours of the groups, in order (then again).
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn err(e: impl std::fmt::Display) -> String {
    format!("plotting: {e}")
}

/// The plot, as SVG text.
pub fn svg(o: &Outcome) -> Result<String, String> {
    let mut out = String::new();
    let duration = (o.duration as f64 / MICROS).max(1e-3);
    let peak = o
        .group_totals
        .iter()
        .map(|g| g.peak_utilisation)
        .fold(1.0, f64::max);
    let util_top = (peak * 1.1).min(5.0).max(1.1);
    let marks: Vec<(f64, String)> = o
        .health_marks
        .iter()
        .map(|(t, n)| (*t as f64 / MICROS, n.clone()))
        .collect();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root
            .titled(
                &format!("policy-sim {} (seed {})", o.name, o.seed),
                ("sans-serif", 20),
            )
            .map_err(err)?;
        let (upper, lower) = root.split_vertically((HEIGHT - 30) / 2);

        // Utilisation.
        let mut chart = ChartBuilder::on(&upper)
            .caption(
                "utilisation: live connections / capacity",
                ("sans-serif", 15),
            )
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..duration, 0f64..util_top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("virtual time (s)")
            .y_desc("utilisation (%)")
            .y_label_formatter(&|v| format!("{:.0}", v * 100.0))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 1.0), (duration, 1.0)],
                BLACK.mix(0.35).stroke_width(1),
            )))
            .map_err(err)?;
        for (i, g) in o.groups.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let points: Vec<(f64, f64)> = o
                .series(g)
                .into_iter()
                .map(|(t, s)| (t, s.utilisation.unwrap_or(util_top).min(util_top)))
                .collect();
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map_err(err)?
                .label(g.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
        }
        mark(&mut chart, &marks, util_top)?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.5))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(err)?;

        // Shares.
        let mut chart = ChartBuilder::on(&lower)
            .caption(
                "share of new connections: forwarded by the device (thin), served by the tables (dashed)",
                ("sans-serif", 15),
            )
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..duration, 0f64..1.05)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("virtual time (s)")
            .y_desc("share (%)")
            .y_label_formatter(&|v| format!("{:.0}", v * 100.0))
            .draw()
            .map_err(err)?;
        for (i, g) in o.groups.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let series = o.series(g);
            let observed: Vec<(f64, f64)> = series
                .iter()
                .filter_map(|(t, s)| s.observed_share.map(|v| (*t, v)))
                .collect();
            let served: Vec<(f64, f64)> =
                series.iter().map(|(t, s)| (*t, s.served_share)).collect();
            chart
                .draw_series(LineSeries::new(observed, colour.mix(0.55).stroke_width(1)))
                .map_err(err)?
                .label(g.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(DashedLineSeries::new(
                    served,
                    6,
                    4,
                    colour.stroke_width(2).into(),
                ))
                .map_err(err)?;
        }
        let dropped: Vec<(f64, f64)> = o
            .records
            .iter()
            .filter(|r| r.arrived > 0)
            .map(|r| (r.t as f64 / MICROS, r.dropped as f64 / r.arrived as f64))
            .collect();
        if dropped.iter().any(|(_, d)| *d > 0.0) {
            chart
                .draw_series(LineSeries::new(dropped, BLACK.stroke_width(2)))
                .map_err(err)?
                .label("dropped")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2))
                });
        }
        mark(&mut chart, &marks, 1.05)?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.5))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Health events: a vertical line each, with its name.
fn mark(chart: &mut Chart<'_, '_>, marks: &[(f64, String)], top: f64) -> Result<(), String> {
    let red = RGBColor(200, 0, 0);
    for (i, (t, name)) in marks.iter().enumerate() {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(*t, 0.0), (*t, top)],
                red.mix(0.6).stroke_width(1),
            )))
            .map_err(err)?;
        // Staggered so that names of close events do not overlap.
        let y = top * (0.97 - 0.06 * (i % 4) as f64);
        chart
            .draw_series(std::iter::once(Text::new(
                format!(" {name}"),
                (*t, y),
                ("sans-serif", 11).into_font().color(&red),
            )))
            .map_err(err)?;
    }
    Ok(())
}
