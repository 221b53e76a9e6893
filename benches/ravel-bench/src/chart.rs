//! The scaling chart: rows/s and peak RSS of each step and peer against the input's rows, one
//! line per step or peer over the results of runs at several sizes, as an SVG.

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use crate::result::{BenchResult, median};

/// One step (or peer) at one input size: medians over the runs of one result.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub rows: u64,
    pub rows_per_s: f64,
    pub peak_rss_mb: f64,
    pub wall_s: f64,
}

/// A step or peer across the sizes: where it finished, and the sizes where it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
    pub failed_at: Vec<u64>,
}

/// The steps a chart shows: the loads and the peers (`gen`, `verify` and queries are not loads).
fn charted(step: &str) -> bool {
    step.starts_with("load") || step == "compact" || step.starts_with("peer-")
}

/// The series of `results` (one result per input size, any order), sorted by rows.
pub fn series(results: &[BenchResult]) -> Vec<Series> {
    let mut by_rows: Vec<&BenchResult> = results.iter().collect();
    by_rows.sort_by_key(|r| r.flags.rows);
    let mut out: Vec<Series> = Vec::new();
    for r in by_rows {
        let rows = r.flags.rows;
        let steps = r.runs.iter().flat_map(|run| &run.steps);
        for step in steps.clone().filter(|s| charted(&s.name)) {
            if out.iter().all(|s| s.name != step.name) {
                out.push(Series {
                    name: step.name.clone(),
                    points: Vec::new(),
                    failed_at: Vec::new(),
                });
            }
        }
        for s in out.iter_mut() {
            let mine: Vec<_> = steps.clone().filter(|x| x.name == s.name).collect();
            let fig = |k: &str| -> Option<f64> {
                let v: Vec<f64> = mine
                    .iter()
                    .filter_map(|x| x.figures.get(k).copied())
                    .collect();
                (!v.is_empty()).then(|| median(&v))
            };
            match (fig("rows_per_s"), fig("peak_rss_mb"), fig("wall_s")) {
                (Some(rows_per_s), Some(peak_rss_mb), Some(wall_s)) => s.points.push(Point {
                    rows,
                    rows_per_s,
                    peak_rss_mb,
                    wall_s,
                }),
                _ if mine.iter().any(|x| x.error.is_some()) => s.failed_at.push(rows),
                _ => {}
            }
        }
    }
    out
}

/// "2M", "10M", "250k": a count (rows, rows per second) for an axis.
pub fn count_label(rows: f64) -> String {
    if rows >= 1e6 {
        format!("{}M", trim(rows / 1e6))
    } else if rows >= 1e3 {
        format!("{}k", trim(rows / 1e3))
    } else {
        trim(rows)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").unwrap_or(&s).to_string()
}

/// A whole number's label; none between whole numbers (an axis of counts).
fn whole_label(v: f64) -> String {
    match v.fract() == 0.0 {
        true => format!("{v:.0}"),
        false => String::new(),
    }
}

/// A value's label: counts as [`count_label`], smaller values with up to two decimals.
fn value_label(v: f64) -> String {
    if v >= 1e3 {
        return count_label(v);
    }
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A line's legend: its name, and where it failed.
fn legend(s: &Series) -> String {
    if s.failed_at.is_empty() {
        return s.name.clone();
    }
    let at: Vec<String> = s.failed_at.iter().map(|r| count_label(*r as f64)).collect();
    format!("{} (failed at {})", s.name, at.join(", "))
}

/// A plotters error (generic over its backend's) as this crate's.
fn drawing<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing the chart: {e}")
}

/// What a panel shows: its caption, its value of a point, how it labels values and where its
/// legend goes (where the lines are not).
struct Panel {
    caption: &'static str,
    value: fn(&Point) -> f64,
    label: fn(f64) -> String,
    legend_at: SeriesLabelPosition,
}

/// One panel: `value` of every series against rows (log scale, a tick at each size).
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[Series],
    p: &Panel,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let pts = series.iter().flat_map(|s| &s.points);
    let rows = |p: &Point| p.rows as f64;
    let mut sizes: Vec<f64> = pts.clone().map(rows).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    let top = pts.map(p.value).fold(0.0, f64::max) * 1.15;
    let (Some(&lo), Some(&hi)) = (sizes.first(), sizes.last()) else {
        return Err(anyhow!("no finished step to chart"));
    };
    let x = (lo / 1.4..hi * 1.4).log_scale().with_key_points(sizes);
    let mut chart = ChartBuilder::on(area)
        .caption(p.caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x, 0.0..top)
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .x_desc("rows (log scale)")
        .x_label_formatter(&|v| count_label(*v))
        .y_label_formatter(&|v| (p.label)(*v))
        .max_light_lines(0)
        .draw()
        .map_err(drawing)?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let xy: Vec<(f64, f64)> = s.points.iter().map(|q| (rows(q), (p.value)(q))).collect();
        chart
            .draw_series(LineSeries::new(xy.clone(), color.stroke_width(2)))
            .map_err(drawing)?
            .label(legend(s))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(xy.into_iter().map(|q| Circle::new(q, 4, color.filled())))
            .map_err(drawing)?;
    }
    chart
        .configure_series_labels()
        .position(p.legend_at.clone())
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(drawing)?;
    Ok(())
}

/// A named line of points (x, y).
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A panel of lines against a linear x axis starting at 0: its caption, its axes' names, and
/// its lines (a panel without points draws its axes and caption alone).
pub struct LinePanel {
    pub caption: String,
    pub x_desc: &'static str,
    pub y_desc: &'static str,
    pub lines: Vec<Line>,
}

/// Draws `p` on `area`, one colour per line, a dot at every point.
pub fn line_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    p: &LinePanel,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let pts = || p.lines.iter().flat_map(|l| &l.points);
    let right = pts().map(|q| q.0).fold(1.0, f64::max);
    let top = pts().map(|q| q.1).fold(0.0, f64::max).max(1e-9) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(&p.caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..right, 0.0..top)
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .x_desc(p.x_desc)
        .y_desc(p.y_desc)
        .x_labels(right.min(10.0) as usize + 1)
        .x_label_formatter(&|v| whole_label(*v))
        .y_label_formatter(&|v| value_label(*v))
        .max_light_lines(0)
        .draw()
        .map_err(drawing)?;
    for (i, l) in p.lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(l.points.clone(), color.stroke_width(2)))
            .map_err(drawing)?
            .label(&l.name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(l.points.iter().map(|q| Circle::new(*q, 3, color.filled())))
            .map_err(drawing)?;
    }
    if pts().next().is_some() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(drawing)?;
    }
    Ok(())
}

/// Panels as SVG text in a grid of `columns`, each 640 × 440, under `title`.
pub fn grid_svg(panels: &[LinePanel], columns: usize, title: &str) -> Result<String> {
    let rows = panels.len().div_ceil(columns.max(1));
    let size = (640 * columns as u32, 440 * rows as u32 + 40);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let root = root.titled(title, ("sans-serif", 22)).map_err(drawing)?;
        for (area, p) in root.split_evenly((rows, columns)).iter().zip(panels) {
            line_panel(area, p)?;
        }
        root.present().map_err(drawing)?;
    }
    Ok(out)
}

/// The chart as SVG text: rows/s on the left, peak RSS on the right.
pub fn svg(series: &[Series], title: &str) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1280, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let root = root.titled(title, ("sans-serif", 22)).map_err(drawing)?;
        let (left, right) = root.split_horizontally(640);
        let speed = Panel {
            caption: "rows per second",
            value: |p| p.rows_per_s,
            label: count_label,
            legend_at: SeriesLabelPosition::LowerLeft,
        };
        let memory = Panel {
            caption: "peak RSS (GB)",
            value: |p| p.peak_rss_mb / 1e3,
            label: trim,
            legend_at: SeriesLabelPosition::UpperLeft,
        };
        panel(&left, series, &speed)?;
        panel(&right, series, &memory)?;
        root.present().map_err(drawing)?;
    }
    Ok(out)
}

/// The figures behind the chart as a Markdown table: one row per size and step.
pub fn table(series: &[Series]) -> String {
    let mut rows: Vec<(u64, &str, Option<&Point>)> = Vec::new();
    for s in series {
        rows.extend(s.points.iter().map(|p| (p.rows, s.name.as_str(), Some(p))));
        rows.extend(s.failed_at.iter().map(|r| (*r, s.name.as_str(), None)));
    }
    rows.sort_by_key(|(r, _, _)| *r);
    let mut out =
        String::from("| rows | step | wall s | rows/s | peak RSS MB |\n|---|---|---|---|---|\n");
    for (r, name, p) in rows {
        let cells = match p {
            Some(p) => format!(
                "{:.1} | {:.0} | {:.0}",
                p.wall_s, p.rows_per_s, p.peak_rss_mb
            ),
            None => "failed | | ".to_string(),
        };
        out += &format!("| {} | {name} | {cells} |\n", count_label(r as f64));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Build, Flags, Machine, Run, Step};
    use std::collections::BTreeMap;

    fn step(name: &str, rows_per_s: f64, rss: f64) -> Step {
        Step {
            name: name.into(),
            figures: BTreeMap::from([
                ("rows_per_s".into(), rows_per_s),
                ("peak_rss_mb".into(), rss),
                ("wall_s".into(), 1.0),
            ]),
            ..Step::default()
        }
    }

    fn result(rows: u64, steps: Vec<Step>) -> BenchResult {
        BenchResult {
            format: crate::result::FORMAT.into(),
            started: String::new(),
            build: Build {
                bin: String::new(),
                version: String::new(),
                commit: String::new(),
            },
            machine: Machine {
                cores: 2,
                mem_total_kb: 0,
                cpu_model: String::new(),
                kernel: String::new(),
                hostname: String::new(),
            },
            flags: Flags {
                rows,
                seed: 1,
                steps: Vec::new(),
                peers: Vec::new(),
                load_args: Vec::new(),
                queries: String::new(),
            },
            prep: BTreeMap::new(),
            runs: vec![Run { steps }],
        }
    }

    #[test]
    fn series_follow_rows_and_name_where_a_peer_failed() {
        let failed = Step {
            name: "peer-polars".into(),
            error: Some("killed".into()),
            ..Step::default()
        };
        let results = [
            result(10_000_000, vec![step("load", 5e5, 2000.0), failed]),
            result(
                2_000_000,
                vec![
                    step("gen", 1.0, 1.0),
                    step("load", 4e5, 1500.0),
                    step("peer-polars", 3e5, 2600.0),
                ],
            ),
        ];
        let s = series(&results);
        assert_eq!(s.len(), 2, "gen is not charted: {s:?}");
        assert_eq!(s[0].name, "load");
        let rows: Vec<u64> = s[0].points.iter().map(|p| p.rows).collect();
        assert_eq!(rows, [2_000_000, 10_000_000]);
        assert_eq!(s[1].failed_at, [10_000_000]);
        assert_eq!(legend(&s[1]), "peer-polars (failed at 10M)");

        let svg = svg(&s, "scaling").unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        assert!(svg.contains("peer-polars (failed at 10M)"));
        assert!(svg.contains("peak RSS (GB)"));
        let t = table(&s);
        assert!(t.contains("| 10M | peer-polars | failed"), "{t}");
        assert!(t.contains("| 2M | load | 1.0 | 400000 | 1500 |"), "{t}");
    }

    #[test]
    fn a_chart_of_nothing_is_an_error() {
        assert!(svg(&[], "empty").is_err());
        assert_eq!(count_label(2e6), "2M");
        assert_eq!(count_label(2.5e5), "250k");
    }
}
