//! The SVG plot of a run (plotters, SVG backend only): each group's utilisation, and its
//! share of new connections (as the device forwarded them, and as the tables serve them), over
//! virtual time, with the health events marked.

use super::engine::{Outcome, Record};
use super::scenario::MICROS;
use plotters::prelude::*;

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 820;
/// The forwarded shares are counted over windows this long (seconds), so that a few
/// connections per refresh do not draw noise.
const SHARE_WINDOW_SECS: f64 = 10.0;

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
    let util_top = (peak * 1.1).clamp(1.1, 5.0);
    let secs = |v: &[(u64, String)]| -> Vec<(f64, String)> {
        v.iter()
            .map(|(t, n)| (*t as f64 / MICROS, n.clone()))
            .collect()
    };
    let marks = Marks {
        health: secs(&o.health_marks),
        rates: secs(&o.rate_marks),
    };
    let window = SHARE_WINDOW_SECS.max(o.refresh as f64 / MICROS);
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
            .x_label_formatter(&|v| format!("{v:.0}"))
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
                format!(
                    "share of new connections: forwarded by the device (thin, {window:.0} s windows), served by the tables (dashed)"
                ),
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
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_desc("share (%)")
            .y_label_formatter(&|v| format!("{:.0}", v * 100.0))
            .draw()
            .map_err(err)?;
        for (i, g) in o.groups.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let series = o.series(g);
            let observed = windowed_share(o, i, window);
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
                .draw_series(DashedLineSeries::new(served, 6, 4, colour.stroke_width(2)))
                .map_err(err)?;
        }
        let dropped = windowed(o, window, |r| r.dropped);
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

/// Share of the new connections of the last `window` seconds that group `gi` got, at each
/// record (where any arrived).
fn windowed_share(o: &Outcome, gi: usize, window: f64) -> Vec<(f64, f64)> {
    let name = &o.groups[gi];
    windowed(o, window, |r| {
        r.groups
            .iter()
            .find(|g| &g.name == name)
            .map_or(0, |g| g.arrived)
    })
}

/// `count` over the records of the last `window` seconds, as a share of their arrivals.
fn windowed(o: &Outcome, window: f64, count: impl Fn(&Record) -> u64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let (mut first, mut n, mut all) = (0usize, 0u64, 0u64);
    for (i, r) in o.records.iter().enumerate() {
        n += count(r);
        all += r.arrived;
        let t = r.t as f64 / MICROS;
        while o.records[first].t as f64 / MICROS <= t - window {
            n -= count(&o.records[first]);
            all -= o.records[first].arrived;
            first += 1;
        }
        if all > 0 && i + 1 < o.records.len() && o.records[i + 1].t == r.t {
            continue; // a health event and the refresh at the same time: draw once
        }
        if all > 0 {
            out.push((t, n as f64 / all as f64));
        }
    }
    out
}

struct Marks {
    health: Vec<(f64, String)>,
    rates: Vec<(f64, String)>,
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Health events (red) and steps of the arrival rate (grey): a vertical line each, with its
/// name.
fn mark(chart: &mut Chart<'_, '_>, marks: &Marks, top: f64) -> Result<(), String> {
    let red = RGBColor(200, 0, 0);
    let grey = RGBColor(90, 90, 90);
    let all = marks
        .rates
        .iter()
        .map(|m| (m, grey))
        .chain(marks.health.iter().map(|m| (m, red)));
    for (i, ((t, name), colour)) in all.enumerate() {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(*t, 0.0), (*t, top)],
                colour.mix(0.6).stroke_width(1),
            )))
            .map_err(err)?;
        // Staggered so that names of close events do not overlap.
        let y = top * (0.97 - 0.06 * (i % 4) as f64);
        chart
            .draw_series(std::iter::once(Text::new(
                format!(" {name}"),
                (*t, y),
                ("sans-serif", 11).into_font().color(&colour),
            )))
            .map_err(err)?;
    }
    Ok(())
}
