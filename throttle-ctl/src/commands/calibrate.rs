//! `throttle-ctl calibrate`: what each link really carries, against what it should.
//!
//! For every node, traffic is sent to the next node (a ring) twice: once at 100% of the
//! configured capacity (what the emulation achieves) and once unlimited (what this host
//! can carry at all). Shapes are restored afterwards, also when a run fails.

use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use serde_json::json;
use throttle_agent::rate::format_bits_per_sec;

use crate::client::AgentClient;
use crate::cluster::Cluster;
use crate::table::Table;

#[derive(Debug, Serialize)]
pub struct LinkCalibration {
    pub from: String,
    pub to: String,
    pub capacity_bytes_per_sec: f64,
    /// Goodput at pct = 100.
    pub achieved_bytes_per_sec: f64,
    /// achieved / capacity - 1.
    pub error: f64,
    /// Goodput with shaping off: what the host can carry.
    pub host_max_bytes_per_sec: f64,
    pub warning: Option<String>,
}

/// Run the calibration; `progress` is told what is being measured.
pub fn run(
    cluster: &Cluster,
    seconds: f64,
    mut progress: impl FnMut(&str),
) -> Result<Vec<LinkCalibration>> {
    let nodes = &cluster.file.nodes;
    if nodes.len() < 2 {
        anyhow::bail!("calibration needs at least two nodes (same-node traffic is not shaped)");
    }
    let timeout = Duration::from_secs_f64(seconds * 2.0 + 20.0);
    let mut out = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let to = &nodes[(i + 1) % nodes.len()];
        let from_c = AgentClient::with_timeout(cluster, n, timeout);
        let to_c = AgentClient::new(cluster, to);
        let saved = [from_c.status()?, to_c.status()?];
        let restore = |c: &AgentClient, s: &throttle_agent::api::Status| {
            c.set_shape(&json!({
                "pct": s.pct.map(|p| json!(p)).unwrap_or(json!("unlimited")),
                "capacity": s.capacity_bytes_per_sec,
                "latency_us": s.latency_us,
            }))
        };
        let measure = |pct: serde_json::Value| -> Result<f64> {
            for c in [&from_c, &to_c] {
                c.set_shape(&json!({ "pct": pct, "latency_us": 0 }))?;
            }
            let r = from_c.calibrate(&to.name, seconds)?;
            Ok(r["achieved_bytes_per_sec"].as_f64().unwrap_or(0.0))
        };
        progress(&format!(
            "{} -> {}: at 100% for {seconds} s",
            n.name, to.name
        ));
        let shaped = measure(json!(100));
        progress(&format!(
            "{} -> {}: unlimited for {seconds} s",
            n.name, to.name
        ));
        let host = shaped.as_ref().ok().map(|_| measure(json!("unlimited")));
        restore(&from_c, &saved[0])?;
        restore(&to_c, &saved[1])?;
        let achieved = shaped?;
        let host_max = host.unwrap_or(Ok(0.0))?;
        let capacity = saved[0].capacity_bytes_per_sec;
        let error = achieved / capacity - 1.0;
        let warning = if host_max < capacity * 1.02 {
            Some(format!(
                "this host carries at most {} between agents, not the {} asked for: lower the capacity to about {}",
                format_bits_per_sec(host_max),
                format_bits_per_sec(capacity),
                format_bits_per_sec(host_max * 0.9)
            ))
        } else if error.abs() > 0.02 {
            Some(format!("achieved rate is off by {:+.1}%", error * 100.0))
        } else {
            None
        };
        out.push(LinkCalibration {
            from: n.name.clone(),
            to: to.name.clone(),
            capacity_bytes_per_sec: capacity,
            achieved_bytes_per_sec: achieved,
            error,
            host_max_bytes_per_sec: host_max,
            warning,
        });
    }
    Ok(out)
}

pub fn render(results: &[LinkCalibration]) -> String {
    let mut t = Table::new(&[
        "link",
        "capacity",
        "achieved at 100%",
        "error",
        "host max (unlimited)",
    ]);
    let mut warnings = String::new();
    for r in results {
        t.row(vec![
            format!("{} -> {}", r.from, r.to),
            format_bits_per_sec(r.capacity_bytes_per_sec),
            format_bits_per_sec(r.achieved_bytes_per_sec),
            format!("{:+.2}%", r.error * 100.0),
            format_bits_per_sec(r.host_max_bytes_per_sec),
        ]);
        if let Some(w) = &r.warning {
            warnings.push_str(&format!("warning: {} -> {}: {w}\n", r.from, r.to));
        }
    }
    format!("{}{warnings}", t.render())
}
