//! `sweep.svg`: throughput and the headline latencies against load, one chart above the other,
//! drawn with plotters' SVG backend (text is SVG `<text>`, so no font is needed).

use super::record::SweepRecord;
use anyhow::{anyhow, Result};
use plotters::prelude::*;

const SIZE: (u32, u32) = (900, 640);
const SERIES: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// The plot as SVG text.
pub fn svg(record: &SweepRecord) -> Result<String> {
    let mut out = String::new();
    draw(record, &mut out).map_err(|e| anyhow!("cannot draw the sweep's plot: {e}"))?;
    Ok(out)
}

/// The x of a level of `sessions` total sessions.
fn x(sessions: f64) -> f64 {
    sessions.max(1.0).log2()
}

/// A plotted point: total sessions, the value, whether the level was qualified.
type Point = (f64, f64, bool);

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn draw(record: &SweepRecord, out: &mut String) -> DrawResult {
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(SIZE.1 / 2);
    let axis = Axis::of(record);
    let knees = knees(record);
    throughput(&top, record, &axis, &knees)?;
    latency(&bottom, record, &axis, &knees)?;
    root.present()?;
    Ok(())
}

/// One half of the picture.
type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// A knee drawn as a vertical line: its total sessions, its name, its colour.
type Knee = (u64, &'static str, RGBColor);

/// The x axis both charts share: log2 of the total sessions on a linear axis, labelled in
/// sessions, so doubling levels are evenly spaced and every power of two gets a label.
struct Axis {
    /// Every level's total sessions.
    loads: Vec<f64>,
    lo: f64,
    hi: f64,
    labels: usize,
}

impl Axis {
    fn of(record: &SweepRecord) -> Axis {
        let loads: Vec<f64> = record
            .levels
            .iter()
            .map(|l| l.sessions_total as f64)
            .collect();
        let lo = x(loads.first().copied().unwrap_or(1.0)) - 0.4;
        let hi = x(loads.last().copied().unwrap_or(1.0)).max(lo + 1.0) + 0.4;
        let labels = ((hi - lo).ceil() as usize + 1).max(2);
        Axis {
            loads,
            lo,
            hi,
            labels,
        }
    }
}

/// The knees the sweep found (client, server throughput, server `--slo`).
fn knees(record: &SweepRecord) -> Vec<Knee> {
    [
        (
            record.knees.client.sessions_total,
            "client knee",
            RGBColor(120, 120, 120),
        ),
        (
            record.knees.server_throughput.sessions_total,
            "server knee (throughput)",
            RGBColor(255, 127, 14),
        ),
        (
            record
                .knees
                .server_slo
                .as_ref()
                .and_then(|k| k.sessions_total),
            "server knee (--slo)",
            RGBColor(140, 86, 75),
        ),
    ]
    .into_iter()
    .filter_map(|(n, name, c)| Some((n?, name, c)))
    .collect()
}

/// The legend of the level a cancel cut short between its repeats, and its x.
fn cut_short(record: &SweepRecord) -> Option<(String, f64)> {
    let level = record.cut_short()?;
    Some((
        format!(
            "{} sessions: cut short ({} of {} repeats)",
            level.sessions_total,
            level.runs.len(),
            record.repeats
        ),
        x(level.sessions_total as f64),
    ))
}

/// Throughput, with the line of a server that keeps up (proportional to the first level).
fn throughput(area: &Area<'_>, record: &SweepRecord, axis: &Axis, knees: &[Knee]) -> DrawResult {
    let (lo, hi, x_labels, loads) = (axis.lo, axis.hi, axis.labels, &axis.loads);
    let points: Vec<Point> = record
        .levels
        .iter()
        .filter_map(|l| {
            Some((
                x(l.sessions_total as f64),
                l.audio_s_per_s?.median,
                l.qualified,
            ))
        })
        .collect();
    let t_max = points.iter().map(|p| p.1).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption("throughput against load", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(lo..hi, 0.0..t_max)?;
    chart
        .configure_mesh()
        .x_desc("sessions (total)")
        .y_desc("audio s per wall s")
        .x_labels(x_labels)
        .x_label_formatter(&|v| format!("{:.0}", v.exp2()))
        .light_line_style(RGBColor(245, 245, 245))
        .draw()?;
    if let Some(&(n0, t0, _)) = points.first() {
        let ideal = loads
            .iter()
            .map(|&n| (x(n), t0 * n / n0.exp2()))
            .filter(|p| p.1 <= t_max);
        chart
            .draw_series(LineSeries::new(
                ideal,
                RGBColor(180, 180, 180).stroke_width(1),
            ))?
            .label("keeps up (proportional)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RGBColor(180, 180, 180)));
    }
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|p| (p.0, p.1)),
            SERIES[0].stroke_width(2),
        ))?
        .label("audio s/s (median)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], SERIES[0]));
    chart.draw_series(points.iter().map(|&(n, t, q)| {
        let style = if q {
            SERIES[0].filled()
        } else {
            SERIES[0].stroke_width(2)
        };
        Circle::new((n, t), 4, style)
    }))?;
    if let Some((label, at)) = cut_short(record) {
        // The level a cancel cut short between its repeats: its point is one repeat's (or a
        // few), not the level's; the table says so beside it too.
        chart
            .draw_series(
                points
                    .iter()
                    .filter(|p| p.0 == at)
                    .map(|p| Cross::new((p.0, p.1), 7, BLACK.stroke_width(2))),
            )?
            .label(label)
            .legend(|(x, y)| Cross::new((x + 10, y), 5, BLACK.stroke_width(2)));
    }
    for &(n, name, color) in knees {
        chart
            .draw_series(LineSeries::new(
                [(x(n as f64), 0.0), (x(n as f64), t_max)],
                color.stroke_width(1),
            ))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// The headline latencies (medians).
fn latency(area: &Area<'_>, record: &SweepRecord, axis: &Axis, knees: &[Knee]) -> DrawResult {
    let (lo, hi, x_labels) = (axis.lo, axis.hi, axis.labels);
    let names = record.headline();
    let series: Vec<(&str, Vec<Point>)> = names
        .iter()
        .map(|&name| {
            let pts = record
                .levels
                .iter()
                .filter_map(|l| {
                    Some((
                        x(l.sessions_total as f64),
                        l.latency(name)?.median,
                        l.qualified,
                    ))
                })
                .collect();
            (name, pts)
        })
        .collect();
    let l_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption("latency against load", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(lo..hi, 0.0..l_max)?;
    chart
        .configure_mesh()
        .x_desc("sessions (total)")
        .y_desc("ms (median)")
        .x_labels(x_labels)
        .x_label_formatter(&|v| format!("{:.0}", v.exp2()))
        .light_line_style(RGBColor(245, 245, 245))
        .draw()?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = SERIES[(i + 1) % SERIES.len()];
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0, p.1)),
                color.stroke_width(2),
            ))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(pts.iter().map(|&(n, v, q)| {
            let style = if q {
                color.filled()
            } else {
                color.stroke_width(2)
            };
            Circle::new((n, v), 4, style)
        }))?;
    }
    if let Some((_, at)) = cut_short(record) {
        chart.draw_series(
            series
                .iter()
                .flat_map(|(_, pts)| pts.iter().filter(|p| p.0 == at))
                .map(|p| Cross::new((p.0, p.1), 7, BLACK.stroke_width(2))),
        )?;
    }
    for &(n, _, color) in knees {
        chart.draw_series(LineSeries::new(
            [(x(n as f64), 0.0), (x(n as f64), l_max)],
            color.stroke_width(1),
        ))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}
