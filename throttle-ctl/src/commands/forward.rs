//! `throttle-ctl forward add|list|rm`: shaped port forwards for unmodified TCP programs.

use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use throttle_agent::transport::forward::{parse_destination, ForwardSpec};

use crate::client::AgentClient;
use crate::cluster::Cluster;
use crate::table::Table;

/// Add `listen on from -> to (NODE:HOST:PORT)`; returns the rule as the agent reports it.
pub fn add(cluster: &Cluster, from: &str, listen: &str, to: &str) -> Result<Value> {
    let node = cluster.node(from)?;
    let (to_node, target) = parse_destination(to).map_err(|e| anyhow!("--to: {e}"))?;
    cluster.node(&to_node)?;
    let spec = ForwardSpec {
        listen: listen.to_string(),
        to_node,
        target,
    };
    spec.check().map_err(|e| anyhow!("{e}"))?;
    AgentClient::new(cluster, node).add_forward(&serde_json::to_value(&spec)?)
}

pub fn list(cluster: &Cluster) -> Result<(Table, Value)> {
    let mut t = Table::new(&["node", "id", "listen", "to", "connections"]);
    let mut all = Vec::new();
    for n in &cluster.file.nodes {
        let v = AgentClient::new(cluster, n).list_forwards()?;
        for f in v["forwards"].as_array().cloned().unwrap_or_default() {
            t.row(vec![
                n.name.clone(),
                f["id"].to_string(),
                f["listen"].as_str().unwrap_or_default().to_string(),
                format!(
                    "{}:{}",
                    f["to_node"].as_str().unwrap_or_default(),
                    f["target"].as_str().unwrap_or_default()
                ),
                f["connections"].to_string(),
            ]);
            let mut f = f.clone();
            f["node"] = json!(n.name);
            all.push(f);
        }
    }
    Ok((t, Value::Array(all)))
}

pub fn remove(cluster: &Cluster, node: &str, id: u64) -> Result<()> {
    AgentClient::new(cluster, cluster.node(node)?).remove_forward(id)
}
