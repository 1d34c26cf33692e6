//! `throttle-ctl set PCT`: throttle one node or all of them.

use anyhow::{anyhow, Result};
use serde_json::{json, Map, Value};
use throttle_agent::api::Status;
use throttle_agent::link::{parse_pct, MAX_LATENCY_US};
use throttle_agent::rate::Rate;

use crate::client::AgentClient;
use crate::cluster::Cluster;

/// What to change; `None` fields stay as they are.
#[derive(Clone, Debug, Default)]
pub struct SetShape {
    /// `Some(None)` = unlimited.
    pub pct: Option<Option<f64>>,
    pub capacity: Option<Rate>,
    pub latency_us: Option<u64>,
}

impl SetShape {
    /// Parse and check the user's values before any agent is touched.
    pub fn parse(pct: &str, capacity: Option<&str>, latency_us: Option<u64>) -> Result<SetShape> {
        let pct = parse_pct(pct).map_err(|e| anyhow!("{e}"))?;
        let capacity = capacity
            .map(|c| Rate::parse(c).map_err(|e| anyhow!("--capacity: {e}")))
            .transpose()?;
        if let Some(l) = latency_us {
            if l > MAX_LATENCY_US {
                return Err(anyhow!(
                    "--latency-us {l} is too large (max {MAX_LATENCY_US})"
                ));
            }
        }
        Ok(SetShape {
            pct: Some(pct),
            capacity,
            latency_us,
        })
    }

    pub fn body(&self) -> Value {
        let mut m = Map::new();
        if let Some(p) = self.pct {
            m.insert(
                "pct".into(),
                match p {
                    Some(v) => json!(v),
                    None => json!("unlimited"),
                },
            );
        }
        if let Some(c) = self.capacity {
            m.insert("capacity".into(), json!(c.bytes_per_sec()));
        }
        if let Some(l) = self.latency_us {
            m.insert("latency_us".into(), json!(l));
        }
        Value::Object(m)
    }
}

/// Apply to `node` (or every node). Stops at the first node that refuses.
pub fn run(cluster: &Cluster, node: Option<&str>, shape: &SetShape) -> Result<Vec<Status>> {
    let body = shape.body();
    cluster
        .select(node)?
        .into_iter()
        .map(|n| AgentClient::new(cluster, n).set_shape(&body))
        .collect()
}
