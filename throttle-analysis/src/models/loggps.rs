//! LogGPS parameters (Mizutani et al.; docs/method.md) from `throttle-loggps` runs: the fit of the master's
//! overhead o = o'_a + o'_b P + O k, and the emulator's own acceptance test, G against
//! 1 / (pct x capacity).

use std::collections::BTreeMap;

use serde::Serialize;
use throttle_proto::Pct;

use super::pmm::LinkCost;
use crate::method::stats::median;

/// G may differ from 1 / (pct x capacity) by this share (the acceptance test).
pub const G_TOLERANCE: f64 = 0.02;

/// One bandwidth setting: medians over its measurements, and G against the setting.
#[derive(Clone, Debug, Serialize)]
pub struct SettingFit {
    pub bw_pct: Pct,
    pub measurements: usize,
    pub procs: Vec<u32>,
    pub latency: f64,
    pub send_overhead: f64,
    pub recv_overhead: f64,
    pub gap: f64,
    pub gap_per_byte: f64,
    /// 1 / (pct x capacity); none when unlimited.
    pub expected_gap_per_byte: Option<f64>,
    /// G / expected - 1.
    pub error: Option<f64>,
    pub passed: Option<bool>,
}

/// o = o'_a + o'_b P + O k for one side (send or receive), from the master's overheads.
#[derive(Clone, Debug, Serialize)]
pub struct OverheadFit {
    pub side: &'static str,
    /// o'_a, o'_b: seconds, seconds per process.
    pub a: f64,
    pub b: f64,
    /// O: seconds per byte (median of the per-measurement slopes over message sizes).
    pub per_byte: f64,
    pub r2: f64,
    /// (P, o) of every measurement.
    pub points: Vec<(f64, f64)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LinkFit {
    pub settings: Vec<SettingFit>,
    /// None with fewer than two process counts.
    pub send: Option<OverheadFit>,
    pub recv: Option<OverheadFit>,
    /// Every setting with an expectation passed the G check.
    pub all_passed: bool,
}

/// One LogGPS measurement through the agents (`model loggps`, as the store keeps it),
/// seconds and bytes.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LinkMeasurement {
    pub measured_at: String,
    pub host: String,
    pub version: String,
    pub job: String,
    /// P: processes of the measurement (rank 0 the master, P - 1 peers).
    pub procs: u32,
    pub bw_pct: Pct,
    /// Payload bytes per second at 100%.
    pub capacity: f64,
    /// L.
    pub latency: f64,
    /// o_s, o_r of the smallest message.
    pub send_overhead: f64,
    pub recv_overhead: f64,
    /// g.
    pub gap: f64,
    /// G, seconds per payload byte.
    pub gap_per_byte: f64,
    /// O_s, O_r, seconds per byte of overhead.
    pub send_per_byte: f64,
    pub recv_per_byte: f64,
    /// The master's o_s, o_r with P - 1 peers.
    pub master_send_overhead: f64,
    pub master_recv_overhead: f64,
    /// The workload's whole report (JSON).
    pub detail: String,
}

pub fn fit(rows: &[LinkMeasurement]) -> LinkFit {
    // Ordered from the highest setting down, unlimited first.
    let mut by: BTreeMap<std::cmp::Reverse<Pct>, Vec<&LinkMeasurement>> = BTreeMap::new();
    for r in rows {
        by.entry(std::cmp::Reverse(r.bw_pct)).or_default().push(r);
    }
    let med = |v: &[&LinkMeasurement], f: fn(&LinkMeasurement) -> f64| {
        median(&v.iter().map(|r| f(r)).collect::<Vec<_>>())
    };
    let settings: Vec<SettingFit> = by
        .values()
        .map(|v| {
            let pct = v[0].bw_pct;
            let g = med(v, |r| r.gap_per_byte);
            let expected = pct.percent().map(|p| 1.0 / (p / 100.0 * v[0].capacity));
            let error = expected.map(|e| g / e - 1.0);
            let mut procs: Vec<u32> = v.iter().map(|r| r.procs).collect();
            procs.sort_unstable();
            procs.dedup();
            SettingFit {
                bw_pct: pct,
                measurements: v.len(),
                procs,
                latency: med(v, |r| r.latency),
                send_overhead: med(v, |r| r.send_overhead),
                recv_overhead: med(v, |r| r.recv_overhead),
                gap: med(v, |r| r.gap),
                gap_per_byte: g,
                expected_gap_per_byte: expected,
                error,
                passed: error.map(|e| e.is_finite() && e.abs() <= G_TOLERANCE),
            }
        })
        .collect();
    let side =
        |name: &'static str, o: fn(&LinkMeasurement) -> f64, k: fn(&LinkMeasurement) -> f64| {
            let points: Vec<(f64, f64)> = rows.iter().map(|r| (r.procs as f64, o(r))).collect();
            let line = super::fit_line(&points)?;
            Some(OverheadFit {
                side: name,
                a: line.intercept,
                b: line.slope,
                per_byte: median(&rows.iter().map(k).collect::<Vec<_>>()),
                r2: line.r2,
                points,
            })
        };
    LinkFit {
        all_passed: settings.iter().all(|s| s.passed != Some(false)),
        send: side("send", |r| r.master_send_overhead, |r| r.send_per_byte),
        recv: side("receive", |r| r.master_recv_overhead, |r| r.recv_per_byte),
        settings,
    }
}

/// The measurements at `pct` of a link of `capacity` (bytes per second at 100%).
pub fn measured_at(rows: &[LinkMeasurement], pct: Pct, capacity: f64) -> Vec<&LinkMeasurement> {
    rows.iter()
        .filter(|r| r.bw_pct == pct && (r.capacity / capacity - 1.0).abs() < 1e-9)
        .collect()
}

/// Tcomm (8 bytes at G) and the start-up time (L + o_s + o_r) measured at `pct` on a
/// link of `capacity`.
pub fn cost_at(rows: &[LinkMeasurement], pct: Pct, capacity: f64) -> Option<LinkCost> {
    let at = measured_at(rows, pct, capacity);
    if at.is_empty() {
        return None;
    }
    Some(LinkCost {
        tcomm: 8.0 * median(&at.iter().map(|r| r.gap_per_byte).collect::<Vec<_>>()),
        tstartup: median(
            &at.iter()
                .map(|r| r.latency + r.send_overhead + r.recv_overhead)
                .collect::<Vec<_>>(),
        ),
        source: "measured".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(procs: u32, pct: f64, g: f64, master_recv: f64) -> LinkMeasurement {
        LinkMeasurement {
            measured_at: "t".into(),
            host: "h".into(),
            version: "v".into(),
            job: "j".into(),
            procs,
            bw_pct: Pct::new(pct).unwrap(),
            capacity: 1.25e8,
            latency: 20e-6,
            send_overhead: 5e-6,
            recv_overhead: 3e-6,
            gap: 6e-6,
            gap_per_byte: g,
            send_per_byte: 1e-10,
            recv_per_byte: 2e-10,
            master_send_overhead: 4e-6,
            master_recv_overhead: master_recv,
            detail: "{}".into(),
        }
    }

    #[test]
    fn the_overhead_line_and_the_g_check() {
        // o_r = 10 us + 0.5 us per process; G exact at 50%, 3% slow at 10%.
        let mut rows = Vec::new();
        for p in [2u32, 4, 8] {
            rows.push(row(
                p,
                50.0,
                1.0 / (0.5 * 1.25e8),
                10e-6 + 0.5e-6 * p as f64,
            ));
            rows.push(row(
                p,
                10.0,
                1.03 / (0.1 * 1.25e8),
                10e-6 + 0.5e-6 * p as f64,
            ));
        }
        let f = fit(&rows);
        let r = f.recv.as_ref().unwrap();
        assert!(
            (r.a - 10e-6).abs() < 1e-12 && (r.b - 0.5e-6).abs() < 1e-12,
            "{r:?}"
        );
        assert!((r.per_byte - 2e-10).abs() < 1e-20);
        assert_eq!(f.settings.len(), 2);
        assert_eq!(f.settings[0].bw_pct, Pct::new(50.0).unwrap());
        assert_eq!(f.settings[0].passed, Some(true));
        assert_eq!(f.settings[1].passed, Some(false));
        assert!((f.settings[1].error.unwrap() - 0.03).abs() < 1e-9);
        assert!(!f.all_passed);
        let c = cost_at(&rows, Pct::new(50.0).unwrap(), 1.25e8).unwrap();
        // Another link's capacity: not this measurement.
        assert!(cost_at(&rows, Pct::new(50.0).unwrap(), 1.25e9).is_none());
        assert!((c.tcomm - 8.0 / (0.5 * 1.25e8)).abs() < 1e-15);
        assert!((c.tstartup - 28e-6).abs() < 1e-12);
        assert!(cost_at(&rows, Pct::new(20.0).unwrap(), 1.25e8).is_none());
        // One process count: no line.
        assert!(fit(&rows[..1]).recv.is_none());
    }
}
