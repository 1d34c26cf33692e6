//! The analysis's five plots: demand against the size with the projection and its
//! interval, completion time and CTI against bandwidth per size, the strong-scaling fit
//! with its residuals, and predicted against measured demand; each drawn as SVG (its
//! font embedded) and as PNG at twice the size. A projection names its model and says
//! when its backtest does not make it trusted.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;
use throttle_analysis::method::demand::Censored;
use throttle_analysis::render::verdict_word;
use throttle_analysis::trust::backtest::Verdict;
use throttle_analysis::{Analysis, Demand, MedianPoint};

use super::plot::*;

pub(super) fn size_label(a: &Analysis, s: u32) -> String {
    format!(
        "{s} procs{}",
        if a.held_out.contains(&s) {
            " (held out)"
        } else {
            ""
        }
    )
}

/// The interval drawn around a point.
type IntervalOf = fn(&MedianPoint) -> (f64, f64);

/// What the figures draw: the analysis, and the link's capacity where known (the demand
/// axes say "% of a 1 Gbit/s link").
#[derive(Clone, Copy)]
pub(super) struct Figures<'a> {
    pub a: &'a Analysis,
    pub capacity: Option<&'a str>,
}

impl Figures<'_> {
    /// The demand axis's label.
    fn demand_axis(&self) -> String {
        match self.capacity {
            Some(c) => format!("bandwidth needed (% of a {c} link)"),
            None => "bandwidth needed (% of the link)".to_string(),
        }
    }
}

/// A projection's name in a legend (its model is in the plot's title), with its
/// verdict's word where it is not trusted: the same word as the verdict's (a legend said
/// NOT TRUSTED where the verdict said untested).
fn projected_name(what: &str, verdict: &Verdict) -> String {
    if verdict.trusted() {
        format!("{what} projected")
    } else {
        format!("{what} projected, {}", verdict_word(verdict))
    }
}

/// A projection plot's title: what it shows, the model and its verdict's word; a model
/// that is no basis (failed or untested) has its interval left out of the plot, and the
/// title says why (the tables print the untested one's run-to-run interval); the
/// projections past the full link are off the scale, and named.
fn projection_title(what: &str, model: &str, verdict: &Verdict, off: &[(u32, f64)]) -> String {
    let word = verdict_word(verdict);
    let head = match verdict {
        v if v.trusted() => format!("{what}; projection: {model} model"),
        Verdict::Failed { .. } => {
            format!("{what}; projection: {model} model, {word}: no interval drawn")
        }
        Verdict::Untested { .. } => format!(
            "{what}; projection: {model} model, {word}: its interval (run-to-run noise only, in the tables) not drawn"
        ),
        _ => format!("{what}; projection: {model} model, {word}"),
    };
    if off.is_empty() {
        return head;
    }
    let named: Vec<String> = off
        .iter()
        .map(|(p, c)| format!("{p} procs at CTI {c}%"))
        .collect();
    format!(
        "{head}; past the full link (saturated), off the scale: {}",
        named.join(", ")
    )
}

/// The projections at or past the full link: (procs, CTI) of each, not drawn.
fn saturated(projections: &[throttle_analysis::Projection]) -> Vec<(u32, f64)> {
    projections
        .iter()
        .filter(|p| p.saturates)
        .map(|p| (p.procs, p.cti))
        .collect()
}

pub(super) fn per_size(
    a: &Analysis,
    y: impl Fn(&MedianPoint) -> Option<f64>,
    interval: Option<IntervalOf>,
) -> Vec<Series> {
    let mut sizes: Vec<u32> = a.points.iter().map(|p| p.procs).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
        .into_iter()
        .map(|s| {
            let mut pts: Vec<&MedianPoint> = a
                .points
                .iter()
                .filter(|p| p.procs == s && y(p).is_some())
                .collect();
            pts.sort_by(|x, y| x.bw_pct.total_cmp(&y.bw_pct));
            Series {
                name: size_label(a, s),
                points: pts
                    .iter()
                    .map(|p| (p.bw_pct, y(p).unwrap_or(0.0)))
                    .collect(),
                intervals: interval.map(|f| pts.iter().map(|p| f(p)).collect()),
                markers: true,
                colour: None,
                ..Default::default()
            }
        })
        .collect()
}

pub(super) fn scaling<DB: DrawingBackend>(area: &Draw<DB>, a: &Analysis) -> Result<()>
where
    DB::ErrorType: 'static,
{
    // In Extra-P's manner: log-log, each size's median with its fastest and slowest
    // run, the model drawn over the measured sizes only. Both axes carry log10 values.
    let mut at_full: Vec<&MedianPoint> = a
        .points
        .iter()
        .filter(|p| p.bw_pct == 100.0 && p.median > 0.0 && p.min > 0.0)
        .collect();
    at_full.sort_by_key(|p| p.procs);
    let u = a.time_unit;
    let pts: Vec<(f64, f64)> = at_full
        .iter()
        .map(|p| ((p.procs.max(1) as f64).log10(), u.shown(p.median).log10()))
        .collect();
    let (lmin, lmax) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    if lmin > lmax {
        return Ok(());
    }
    let x = Ticked::new(
        lmin - 0.05..lmax + 0.05,
        procs_ticks(at_full.iter().map(|p| p.procs)),
    );
    let log_y = YAxis {
        range: None,
        format: from_log_compact,
        log: true,
    };
    let y_label = format!("{} (log scale)", a.time_axis());
    let mut measured = Series::measured("median (bars: min-max)", pts.clone());
    measured.intervals = Some(
        at_full
            .iter()
            .map(|p| {
                let (lo, hi) = u.shown_interval(p.min, p.max);
                (lo.log10(), hi.log10())
            })
            .collect(),
    );
    let Some(r) = &a.regression else {
        return plot_with(
            area,
            "strong scaling at 100% (no fit: too few sizes)",
            ("processes (log scale)", &y_label),
            x,
            procs_label,
            log_y,
            &[measured],
        );
    };
    let (top, bottom) = area.split_vertically(area.dim_in_pixel().1 * 2 / 3);
    // The fit is in the analysed unit; drawn as shown (a rate's inverse as the rate).
    let model = |p: f64| u.shown(r.c0 + r.c1 / p + r.c2 / p.sqrt());
    let mut series = vec![
        Series {
            name: "the paper's T(p)".into(),
            points: log_curve(lmin, lmax, model),
            intervals: None,
            markers: false,
            colour: None,
            ..Default::default()
        },
        measured,
    ];
    series.extend(traffic_baseline(a));
    plot_with(
        &top,
        &format!("strong scaling at 100% (the fit's R^2 {:.2})", r.r2),
        ("processes (log scale)", &y_label),
        x.clone(),
        procs_label,
        log_y,
        &series,
    )?;
    residuals(&bottom, a, &at_full, model, x)
}

/// The strong-scaling `model`'s residuals at each size measured at 100% (`at_full`),
/// against the size on a log axis (`x`, log10 values).
fn residuals<DB: DrawingBackend>(
    area: &Draw<DB>,
    a: &Analysis,
    at_full: &[&MedianPoint],
    model: impl Fn(f64) -> f64,
    x: Ticked,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let resid: Vec<(f64, f64)> = at_full
        .iter()
        .map(|p| {
            let n = p.procs.max(1) as f64;
            (n.log10(), a.time_unit.shown(p.median) - model(n))
        })
        .collect();
    plot(
        area,
        "residuals (measured - model)",
        "processes (log scale)",
        &a.time_axis(),
        x,
        procs_label,
        &[Series::measured("residual", resid)],
    )
}

/// `f` over sizes from 10^`l0` to 10^`l1`, evenly spaced on a log axis (101 points), as
/// log10 values.
fn log_curve(l0: f64, l1: f64, f: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
    // Where the model is not positive it has no place on a log axis.
    (0..=100)
        .map(|i| l0 + (l1 - l0) * i as f64 / 100.0)
        .map(|l| (l, f(10f64.powf(l))))
        .filter(|&(_, t)| t.is_finite() && t > 0.0)
        .map(|(l, t)| (l, t.log10()))
        .collect()
}

/// The traffic model's T(100%), chosen by the model search, over the sizes it was fitted
/// on (log10 values); none without a traffic model fitted on two sizes or more.
fn traffic_baseline(a: &Analysis) -> Option<Series> {
    let fit = a.traffic.as_ref().and_then(|t| t.fit.as_ref())?;
    let sizes = fit.exposed_by_size.iter().map(|&(p, _)| p as f64);
    let (lo, hi) = sizes.fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p), b.max(p)));
    if lo >= hi {
        return None;
    }
    let m = &fit.baseline.best;
    Some(Series {
        name: "traffic model's T(100%)".into(),
        points: log_curve(lo.log10(), hi.log10(), |p| m.at(p)),
        intervals: None,
        markers: false,
        colour: Some(2),
        ..Default::default()
    })
}

/// Demand against the CTI level per size: measured, and the DC model's projection to the
/// sizes asked (dashed, hollow, its interval a band), marked when not trusted.
pub(super) fn demand_plot<DB: DrawingBackend>(area: &Draw<DB>, f: Figures<'_>) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let a = f.a;
    let mut series = Vec::new();
    let mut sizes: Vec<u32> = a.demand.iter().map(|d| d.procs).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for s in sizes {
        let of_size = || a.demand.iter().filter(move |d| d.procs == s);
        // A level below the noise floor is no measurement: not drawn.
        let pts: Vec<(f64, f64)> = of_size()
            .filter(|d| d.censored == Censored::None && !d.below_noise)
            .map(|d| (d.cti, d.bw_pct))
            .collect();
        // A censored demand is drawn at its bound, hollow, with an arrow: never as a
        // point on the line (its figure is no measurement).
        let bounds: Vec<((f64, f64), bool)> = of_size()
            .filter_map(|d| Some(((d.cti, d.bound?), d.censored == Censored::Above)))
            .collect();
        if !pts.is_empty() || !bounds.is_empty() {
            let mut m = Series::measured(format!("{} measured", size_label(a, s)), pts);
            m.bounds = bounds;
            series.push(m);
        }
    }
    let failed = !a.verdict.is_basis();
    let mut targets: Vec<u32> = a.projection.iter().map(|p| p.procs).collect();
    targets.sort_unstable();
    targets.dedup();
    for t in targets {
        // A projection past the link is no demand (the link saturates first): not drawn.
        let proj: Vec<_> = a
            .projection
            .iter()
            .filter(|p| p.procs == t && !p.saturates)
            .collect();
        if proj.is_empty() {
            continue;
        }
        series.push(Series {
            name: projected_name(&format!("{t} procs"), &a.verdict),
            points: proj.iter().map(|p| (p.cti, p.bw_pct)).collect(),
            // A model its backtest refuted (or never checked) has no interval worth a band.
            intervals: (!failed && proj.iter().all(|p| interval_of(p).is_some()))
                .then(|| proj.iter().filter_map(|p| interval_of(p)).collect()),
            markers: true,
            projected: true,
            ..Default::default()
        });
    }
    let Some((x0, x1)) = x_extent(&series) else {
        return Ok(());
    };
    let title = projection_title(
        "demand per CTI level",
        "DC",
        &a.verdict,
        &saturated(&a.projection),
    );
    plot(
        area,
        &title,
        "completion-time increment, CTI (%)",
        &f.demand_axis(),
        (x0 - 1.0).max(0.0)..x1 + 1.0,
        compact,
        &series,
    )
}

/// The lowest and highest x of `series`' points and bounds; `None` with none.
fn x_extent(series: &[Series]) -> Option<(f64, f64)> {
    let xs = series.iter().flat_map(|s| {
        s.points
            .iter()
            .map(|p| p.0)
            .chain(s.bounds.iter().map(|b| b.0 .0))
    });
    let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    (x0 <= x1).then_some((x0, x1))
}

/// The interval a projection is drawn with: noise and model error where known, else
/// the run-to-run interval.
fn interval_of(p: &throttle_analysis::Projection) -> Option<(f64, f64)> {
    p.interval.or(p.noise_interval).map(|i| (i.low, i.high))
}

/// Demand against the size, one colour per CTI level: what was measured (solid, filled;
/// censored demands hollow at their bound, with an arrow), and the projection the bottom
/// line uses (or the traffic one, else DC's) at the sizes asked (dashed, hollow, its
/// interval a band), its model named and NOT TRUSTED where its backtest says so. The
/// process axis has its ticks at the sizes drawn.
pub(super) fn demand_vs_size<DB: DrawingBackend>(area: &Draw<DB>, f: Figures<'_>) -> Result<()>
where
    DB::ErrorType: 'static,
{
    use throttle_analysis::trust::backtest::Model;
    let a = f.a;
    let (projections, model, verdict) = match &a.traffic {
        Some(t) if a.bottom_line.model != Some(Model::Dc) => (&t.projection, "traffic", &t.verdict),
        _ => (&a.projection, "DC", &a.verdict),
    };
    let failed = !verdict.is_basis();
    let mut levels: Vec<f64> = a.demand.iter().map(|d| d.cti).collect();
    levels.sort_by(|x, y| x.total_cmp(y));
    levels.dedup();
    let lg = |p: u32| (p.max(1) as f64).log10();
    let mut series = Vec::new();
    let mut sizes: Vec<u32> = Vec::new();
    for (li, &c) in levels.iter().enumerate() {
        // Measured and fitted on: joined by a line. A level below its size's noise
        // floor is no measurement (not drawn); a held-out size is drawn apart, unjoined.
        let all: Vec<_> = a
            .demand
            .iter()
            .filter(|d| d.cti == c && !d.below_noise)
            .collect();
        sizes.extend(all.iter().map(|d| d.procs));
        let (held, mine): (Vec<_>, Vec<_>) = all.into_iter().partition(|d| d.held_out);
        let mut m = by_size(format!("CTI {c}% measured"), &mine);
        m.colour = Some(li);
        series.push(m);
        if !held.is_empty() {
            let mut h = by_size(format!("CTI {c}% held out"), &held);
            h.intervals = None;
            h.colour = Some(li);
            h.held_out = true;
            series.push(h);
        }
        let proj: Vec<_> = projections
            .iter()
            .filter(|p| p.cti == c && !p.saturates)
            .collect();
        if !proj.is_empty() {
            sizes.extend(proj.iter().map(|p| p.procs));
            series.push(Series {
                name: projected_name(&format!("CTI {c}%"), verdict),
                points: proj.iter().map(|p| (lg(p.procs), p.bw_pct)).collect(),
                // Each level's interval as bars at its points (bands of four levels
                // blend into one); none for a model its backtest refuted or never checked.
                intervals: (!failed && proj.iter().all(|p| interval_of(p).is_some()))
                    .then(|| proj.iter().filter_map(|p| interval_of(p)).collect()),
                markers: true,
                colour: Some(li),
                projected: true,
                bars: true,
                ..Default::default()
            });
        }
    }
    let Some((x0, x1)) = x_extent(&series) else {
        return Ok(());
    };
    let title = projection_title(
        "demand against the size",
        model,
        verdict,
        &saturated(projections),
    );
    let title = if failed {
        title
    } else {
        format!("{title}; bars: 90% intervals")
    };
    plot(
        area,
        &title,
        "processes (log scale)",
        &f.demand_axis(),
        Ticked::new(x0 - 0.05..x1 + 0.05, procs_ticks(sizes)),
        procs_label,
        &series,
    )
}

/// Measured demands against the size (log10 of the procs): an uncensored one a point,
/// with the intervals when every point has one; a censored one at its bound.
fn by_size(name: String, demands: &[&Demand]) -> Series {
    let lg = |p: u32| (p.max(1) as f64).log10();
    let uncensored = || demands.iter().filter(|d| d.censored == Censored::None);
    let mut s = Series::measured(
        name,
        uncensored().map(|d| (lg(d.procs), d.bw_pct)).collect(),
    );
    s.intervals = uncensored()
        .map(|d| d.interval.map(|i| (i.low, i.high)))
        .collect::<Option<Vec<_>>>();
    s.bounds = demands
        .iter()
        .filter_map(|d| Some(((lg(d.procs), d.bound?), d.censored == Censored::Above)))
        .collect();
    s
}

/// CTI against bandwidth per size, on an axis that shows the levels asked for: from 0
/// (or the lowest CTI) to 1.3 times the highest level (at least 30%), higher CTIs (the
/// slowest steps) clipped at its top. The levels and the noise floor are drawn across
/// it: where a curve crosses a level is that size's demand; under the floor, a crossing
/// is noise.
fn cti_plot<DB: DrawingBackend>(area: &Draw<DB>, a: &Analysis) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let mut s = per_size(a, |p| p.cti, None);
    let x = log_bandwidth(&mut s);
    let (x_start, x_end) = x.ends();
    let mut levels: Vec<f64> = a.demand.iter().map(|d| d.cti).collect();
    levels.sort_by(|x, y| x.total_cmp(y));
    levels.dedup();
    // The highest of the sizes' noise floors: a crossing under it may be noise at some
    // size.
    let floor = a
        .noise
        .iter()
        .map(|f| f.cti_pct)
        .filter(|f| f.is_finite())
        .max_by(|x, y| x.total_cmp(y));
    let top = (levels.last().copied().unwrap_or(25.0) * 1.3)
        .max(30.0)
        .max(floor.unwrap_or(0.0) * 1.1);
    let bottom = s
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::min)
        - 1.0;
    let hidden = clip_above(&mut s, top);
    for c in levels {
        s.push(Series {
            name: format!("CTI {c}% (asked)"),
            points: vec![(x_start, c), (x_end, c)],
            intervals: None,
            markers: false,
            colour: Some(7),
            // On the right, where the curves run low: clear of their points.
            label_at_end: Some(End::Right),
            ..Default::default()
        });
    }
    if let Some(f) = floor {
        s.push(Series {
            name: format!("noise floor ({f:.1}%, the highest)"),
            points: vec![(x_start, f), (x_end, f)],
            intervals: None,
            markers: false,
            colour: Some(5),
            // On the left, where the curves run high: clear of their points.
            label_at_end: Some(End::Left),
            ..Default::default()
        });
    }
    let title = if hidden > 0 {
        format!("completion-time increment vs bandwidth ({hidden} point(s) above {top:.0}% off the axis)")
    } else {
        "completion-time increment vs bandwidth".to_string()
    };
    plot_with(
        area,
        &title,
        ("bandwidth (% of the link, log scale)", "CTI (%)"),
        x,
        from_log,
        YAxis {
            range: Some((bottom, top)),
            format: compact,
            log: false,
        },
        &s,
    )
}

pub(super) fn draw_one<DB: DrawingBackend>(
    name: &str,
    area: &Draw<DB>,
    f: Figures<'_>,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let a = f.a;
    match name {
        "time_vs_bandwidth" => {
            // The bars are the fastest and slowest run, as in the strong-scaling plot:
            // one meaning for error bars in every plot.
            let mut s = per_size(a, |p| Some(p.median), Some(|p| (p.min, p.max)));
            // As shown: a rate's inverse as the rate.
            let u = a.time_unit;
            for series in &mut s {
                for p in &mut series.points {
                    p.1 = u.shown(p.1);
                }
                for i in series.intervals.iter_mut().flatten() {
                    *i = u.shown_interval(i.0, i.1);
                }
            }
            // Values over a decade apart (a rate on one node and on several) on a log
            // axis: on a linear one the small ones lie flat on zero.
            let (lo, hi) = s
                .iter()
                .flat_map(|x| &x.points)
                .fold((f64::MAX, f64::MIN), |(l, h), p| (l.min(p.1), h.max(p.1)));
            let log = lo > 0.0 && hi / lo > 10.0;
            if log {
                for series in &mut s {
                    for p in &mut series.points {
                        p.1 = p.1.log10();
                    }
                    for i in series.intervals.iter_mut().flatten() {
                        *i = (i.0.max(f64::MIN_POSITIVE).log10(), i.1.log10());
                    }
                }
            }
            let x = log_bandwidth(&mut s);
            let y_label = if log {
                format!("{} (log scale)", a.time_axis())
            } else {
                a.time_axis()
            };
            plot_with(
                area,
                &time_title(a.time_unit),
                ("bandwidth (% of the link, log scale)", &y_label),
                x,
                from_log,
                YAxis {
                    range: None,
                    format: if log { from_log_compact } else { compact },
                    log,
                },
                &s,
            )
        }
        "cti_vs_bandwidth" => cti_plot(area, a),
        "strong_scaling" => scaling(area, a),
        "demand_vs_size" => demand_vs_size(area, f),
        _ => demand_plot(area, f),
    }?;
    // Once, on the whole drawing: the SVG backend writes its file here, so every panel
    // (the residuals too) is in it.
    area.present().map_err(err)
}

/// The time plot's title, by what the times are.
fn time_title(u: throttle_analysis::TimeUnit) -> String {
    let what = match u {
        throttle_analysis::TimeUnit::Seconds => "completion time",
        throttle_analysis::TimeUnit::InverseRate => "the program's rate",
    };
    format!("{what} vs bandwidth (median; bars: min-max)")
}

pub(super) fn render_all(dir: &Path, f: Figures<'_>) -> Result<Vec<(String, String)>> {
    let time_heading = match f.a.time_unit {
        throttle_analysis::TimeUnit::Seconds => "Completion time vs bandwidth",
        throttle_analysis::TimeUnit::InverseRate => "The program's rate vs bandwidth",
    };
    let plots: [(&str, &str); 5] = [
        (
            "demand_vs_size",
            "Bandwidth demand against the size: measured, and the projection with its interval",
        ),
        ("time_vs_bandwidth", time_heading),
        ("cti_vs_bandwidth", "Completion-time increment vs bandwidth"),
        ("strong_scaling", "Strong-scaling fit and residuals"),
        (
            "demand",
            "Bandwidth demand per CTI level, measured and projected (DC model)",
        ),
    ];
    let mut out = Vec::new();
    for (name, title) in plots {
        let svg_path = dir.join(format!("{name}.svg"));
        let png_path = dir.join(format!("{name}.png"));
        draw_one(
            name,
            &SVGBackend::new(&svg_path, (W, H)).into_drawing_area(),
            f,
        )?;
        embed_font(&svg_path)?;
        draw_one(
            name,
            &BitMapBackend::new(&png_path, (W * PNG_SCALE, H * PNG_SCALE)).into_drawing_area(),
            f,
        )?;
        out.push((name.to_string(), title.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 54: a plot's legend and title say what the verdict says (an untested
    /// projection's legend said NOT TRUSTED, its title "no interval" where the table
    /// printed one), and what lies past the full link is named, not silently left out.
    #[test]
    fn legends_and_titles_say_the_verdicts_word_and_what_is_off_the_scale() {
        let untested = Verdict::Untested { why: "x".into() };
        assert_eq!(
            projected_name("16 procs", &untested),
            "16 procs projected, untested"
        );
        let t = projection_title("demand against the size", "DC", &untested, &[]);
        assert!(
            t.contains("DC model, untested") && t.contains("in the tables"),
            "{t}"
        );
        let failed = Verdict::Failed {
            why: "x".into(),
            misses: 3,
            checks: 4,
            worst_pp: 9.0,
        };
        let t = projection_title("d", "DC", &failed, &[(16, 10.0), (16, 15.0)]);
        assert_eq!(
            t,
            "d; projection: DC model, FAILED: no interval drawn; past the full link (saturated), off the scale: 16 procs at CTI 10%, 16 procs at CTI 15%"
        );
        let passed = Verdict::Passed {
            checks: 4,
            sizes: 2,
            misses: 0,
            rms_pp: 1.0,
            worst_pp: 2.0,
        };
        assert_eq!(projected_name("CTI 10%", &passed), "CTI 10% projected");
        assert_eq!(
            projection_title("d", "traffic", &passed, &[]),
            "d; projection: traffic model"
        );
    }
}
