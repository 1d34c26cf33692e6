//! `throttle-ctl status`: every node's shape, rates and streams, as a table or JSON.

use anyhow::Result;
use serde_json::{json, Value};
use throttle_agent::api::Status;
use throttle_agent::rate::format_bits_per_sec;

use crate::client::AgentClient;
use crate::cluster::Cluster;
use crate::table::Table;

/// Each node's status, or the error that kept us from getting it (queried in parallel).
pub fn collect(cluster: &Cluster) -> Vec<(String, Result<Status>)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = cluster
            .file
            .nodes
            .iter()
            .map(|n| {
                let c = AgentClient::new(cluster, n);
                (n.name.clone(), s.spawn(move || c.status()))
            })
            .collect();
        handles
            .into_iter()
            .map(|(name, h)| {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("status query panicked")));
                (name, r)
            })
            .collect()
    })
}

pub fn pct_text(pct: Option<f64>) -> String {
    match pct {
        Some(p) => format!("{p}%"),
        None => "unlimited".into(),
    }
}

/// Render as a table; the second value is true when every node answered.
pub fn render(results: &[(String, Result<Status>)]) -> (String, bool) {
    let mut t = Table::new(&[
        "node",
        "pct",
        "capacity",
        "limit",
        "latency",
        "egress",
        "ingress",
        "streams",
        "egress bytes",
    ]);
    let mut all_ok = true;
    for (name, r) in results {
        match r {
            Ok(s) => t.row(vec![
                name.clone(),
                pct_text(s.pct),
                s.capacity.clone(),
                s.limit_bytes_per_sec
                    .map(format_bits_per_sec)
                    .unwrap_or_else(|| "-".into()),
                format!("{} us", s.latency_us),
                format_bits_per_sec(s.egress.rate_bytes_per_sec),
                format_bits_per_sec(s.ingress.rate_bytes_per_sec),
                s.open_streams.to_string(),
                s.egress.bytes.to_string(),
            ]),
            Err(e) => {
                all_ok = false;
                t.row(vec![name.clone(), format!("DOWN: {e}")]);
            }
        }
    }
    (t.render(), all_ok)
}

pub fn to_json(results: &[(String, Result<Status>)]) -> Value {
    Value::Array(
        results
            .iter()
            .map(|(name, r)| match r {
                Ok(s) => serde_json::to_value(s).unwrap_or(Value::Null),
                Err(e) => json!({ "node": name, "error": e.to_string() }),
            })
            .collect(),
    )
}
