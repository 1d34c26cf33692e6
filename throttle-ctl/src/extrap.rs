//! Extra-P's text input (`export --format extrap`): one series' runs as a file
//! `extrap --text FILE` reads, to model the completion time over two parameters, `p`
//! (processes) and `bw` (the bandwidth, % of the link), and a third, `n`, for a series
//! swept over a problem axis (its `[problem]` values).
//!
//! The grammar is Extra-P's (`docs/file-formats.md` and
//! `extrap/fileio/file_reader/text_file_reader.py` in github.com/extra-p/extrap, 4.2.5):
//! `#` comment lines, `PARAMETER name` lines, `POINTS ( p bw )` lines, then `REGION`,
//! `METRIC` and one `DATA v1 v2 ...` line per point in POINTS' order, its values the
//! point's repeats. Why two parameters in one file: docs/decisions/0045-extrap-export.md.
//! The runs are the ones `analyze` uses ([`throttle_analysis::runs_of`]): successful, throttled
//! (not unlimited), flagged ones left out; the comment lines say how many were left out.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use throttle_analysis::data::cells::{cell_bw, percent, BwKey};
use throttle_analysis::{Observation, TimeUnit};

/// The metric's name in the file and what it is, by the unit of the times.
pub fn metric(unit: TimeUnit) -> &'static str {
    match unit {
        // Extra-P treats a metric named `time` as the run time (its strong-scaling check).
        TimeUnit::Seconds => "time",
        TimeUnit::InverseRate => "inverse_rate",
    }
}

/// A series label as a REGION: Extra-P reads a region's name to the end of the line,
/// runs of blanks as one, and `->` as a call path's separator; control characters are
/// written out by the analysis already.
fn region(series: &str) -> String {
    let name = series
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("->", "-_>");
    if name.is_empty() {
        "run".into()
    } else {
        name
    }
}

/// The runs of `series` (the only one when `None`) as Extra-P's text input. `what`: what
/// the times are, in words; `capacity`: the link's, in words, when known.
pub fn text(
    obs: &[Observation],
    series: Option<&str>,
    unit: TimeUnit,
    what: &str,
    capacity: Option<&str>,
) -> Result<String> {
    let chosen = throttle_analysis::choose_series(obs, &series.map(str::to_string))?;
    let runs = throttle_analysis::runs_of(obs, &chosen);
    if runs.good.is_empty() {
        bail!(
            "series `{chosen}` has no run Extra-P could model: {} failed, {} flagged (links not at their setting), {} at unlimited bandwidth, none successful at a bandwidth setting",
            runs.failed,
            runs.flagged.len(),
            runs.unlimited
        );
    }
    // Each point's repeats, in repeat order; a series swept over a problem axis has
    // its value as a third parameter, n.
    let with_problem = runs.good.iter().any(|o| o.problem.is_some());
    let mut points: BTreeMap<(u32, u64, BwKey), Vec<(u32, f64)>> = BTreeMap::new();
    for o in &runs.good {
        points
            .entry((
                o.procs,
                o.problem.unwrap_or(0.0).to_bits(),
                cell_bw(o.bw_pct),
            ))
            .or_default()
            .push((o.repeat, o.seconds));
    }
    let name = metric(unit);
    let mut out = String::new();
    let comment = |out: &mut String, line: String| {
        // A comment is one line: no line break may end it early.
        out.push_str(&format!("# {}\n", line.replace(['\n', '\r'], " ")));
    };
    comment(
        &mut out,
        "throttle-ctl export --format extrap: Extra-P's text input (extrap --text FILE)".into(),
    );
    comment(&mut out, format!("series: {chosen}"));
    comment(
        &mut out,
        format!(
            "p: processes; {}bw: the bandwidth setting, % of the link{}",
            if with_problem {
                "n: the problem value of its sweep's [problem]; "
            } else {
                ""
            },
            capacity.map(|c| format!(" ({c})")).unwrap_or_default()
        ),
    );
    comment(&mut out, format!("metric {name}: {what}"));
    comment(
        &mut out,
        format!(
            "{} runs at {} points; one DATA line per point, in POINTS' order: its repeats",
            runs.good.len(),
            points.len()
        ),
    );
    comment(
        &mut out,
        format!(
            "left out, as analyze leaves them out: {} failed, {} flagged (links not at their setting), {} at unlimited bandwidth",
            runs.failed,
            runs.flagged.len(),
            runs.unlimited
        ),
    );
    if with_problem {
        out.push_str("PARAMETER p\nPARAMETER n\nPARAMETER bw\n\n");
    } else {
        out.push_str("PARAMETER p\nPARAMETER bw\n\n");
    }
    for &(p, n, bw) in points.keys() {
        if with_problem {
            out.push_str(&format!(
                "POINTS ( {p} {} {} )\n",
                f64::from_bits(n),
                percent(bw)
            ));
        } else {
            out.push_str(&format!("POINTS ( {p} {} )\n", percent(bw)));
        }
    }
    out.push_str(&format!("\nREGION {}\nMETRIC {name}\n", region(&chosen)));
    for values in points.values_mut() {
        values.sort_by_key(|v| v.0);
        let v: Vec<String> = values.iter().map(|v| v.1.to_string()).collect();
        out.push_str(&format!("DATA {}\n", v.join(" ")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_proto::Pct;

    fn run(procs: u32, bw: Pct, repeat: u32, seconds: f64) -> Observation {
        Observation {
            series: "mw n=3".into(),
            procs,
            bw_pct: bw,
            repeat,
            seconds,
            ok: true,
            nodes: 1,
            busy: None,
            cpu_own: None,
            bytes_sent: None,
            busiest_bytes: None,
            flag: None,
            problem: None,
            latency_step: None,
        }
    }

    #[test]
    fn each_point_is_one_data_line_of_its_repeats_in_points_order() {
        let half = Pct::new(50.0).unwrap();
        let obs = vec![
            run(4, Pct::FULL, 1, 1.5),
            run(2, half, 0, 3.0),
            run(4, Pct::FULL, 0, 1.25),
            run(2, Pct::FULL, 0, 2.0),
            run(2, Pct::UNLIMITED, 0, 1.9),
            Observation {
                flag: Some("starved".into()),
                ..run(2, half, 1, 9.0)
            },
            Observation {
                ok: false,
                ..run(2, half, 2, 0.0)
            },
        ];
        let t = text(&obs, None, TimeUnit::Seconds, "job completion time", None).unwrap();
        let body: Vec<&str> = t.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            body,
            [
                "PARAMETER p",
                "PARAMETER bw",
                "",
                "POINTS ( 2 50 )",
                "POINTS ( 2 100 )",
                "POINTS ( 4 100 )",
                "",
                "REGION mw n=3",
                "METRIC time",
                "DATA 3",
                "DATA 2",
                "DATA 1.25 1.5",
            ],
            "{t}"
        );
        assert!(
            t.contains("1 failed, 1 flagged (links not at their setting), 1 at unlimited"),
            "{t}"
        );
    }

    #[test]
    fn a_problem_axis_is_a_third_parameter() {
        let half = Pct::new(50.0).unwrap();
        let obs = vec![
            Observation {
                problem: Some(2e6),
                ..run(2, half, 0, 3.0)
            },
            Observation {
                problem: Some(1e6),
                ..run(2, half, 0, 2.0)
            },
            Observation {
                problem: Some(1e6),
                ..run(2, Pct::FULL, 0, 1.0)
            },
        ];
        let t = text(&obs, None, TimeUnit::Seconds, "time", None).unwrap();
        let body: Vec<&str> = t.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            body[..7],
            [
                "PARAMETER p",
                "PARAMETER n",
                "PARAMETER bw",
                "",
                "POINTS ( 2 1000000 50 )",
                "POINTS ( 2 1000000 100 )",
                "POINTS ( 2 2000000 50 )",
            ],
            "{t}"
        );
        assert_eq!(
            body[body.len() - 3..],
            ["DATA 2", "DATA 1", "DATA 3"],
            "{t}"
        );
    }

    #[test]
    fn a_label_cannot_break_a_line_or_become_a_call_path() {
        assert_eq!(region("a  b\t->c"), "a b -_>c");
        assert_eq!(region(" "), "run");
        let obs = vec![run(1, Pct::FULL, 0, 1.0)];
        let t = text(
            &obs,
            None,
            TimeUnit::InverseRate,
            "1/rate\nX",
            Some("1 Gbit/s"),
        )
        .unwrap();
        assert!(t.contains("# metric inverse_rate: 1/rate X\n"), "{t}");
        assert!(t.contains("% of the link (1 Gbit/s)"), "{t}");
        let none = [Observation {
            ok: false,
            ..run(1, Pct::FULL, 0, 0.0)
        }];
        let e = text(&none, None, TimeUnit::Seconds, "", None).unwrap_err();
        assert!(e.to_string().contains("1 failed"), "{e}");
    }
}
