//! The agents' node directory: the cluster file's nodes and their data addresses, given
//! to every agent.
//!
//! An agent knows the other nodes only from its directory (`PUT /cluster`): rank streams,
//! forwards and interception reach a node by it. `local up` gives it when it starts the
//! agents; agents started any other way (by hand from `cluster init`'s lines, `deploy`,
//! `srun` in a Slurm job) start with an empty one, and an agent that restarted has lost
//! it. So every run checks its nodes' directories first and gives the cluster file's to
//! those that differ ([`ensure`]).

use anyhow::{Context, Result};
use throttle_proto::cluster::{ClusterNodes, NodeEntry};

use crate::cluster::agent_client::AgentClient;
use crate::cluster::{Cluster, Node};

/// The directory the cluster file describes.
pub fn of(cluster: &Cluster) -> ClusterNodes {
    ClusterNodes {
        nodes: cluster
            .file
            .nodes
            .iter()
            .map(|n| NodeEntry {
                name: n.name.clone(),
                data: n.data,
            })
            .collect(),
    }
}

/// Give every agent the cluster file's directory.
pub fn push(cluster: &Cluster) -> Result<()> {
    let body = of(cluster);
    for n in &cluster.file.nodes {
        AgentClient::new(cluster, n)
            .put_cluster(&body)
            .with_context(|| format!("cannot give node `{}` the cluster's directory", n.name))?;
    }
    Ok(())
}

/// Give the cluster file's directory to each agent of `nodes` (a run's) whose directory
/// differs from it (in any order); returns the nodes that were given it. The other nodes'
/// agents are not asked: a run does not need them, and one may be down.
pub fn ensure(cluster: &Cluster, nodes: &[Node]) -> Result<Vec<String>> {
    let mut want = of(cluster).nodes;
    want.sort_by(|a, b| a.name.cmp(&b.name));
    let body = ClusterNodes {
        nodes: want.clone(),
    };
    let mut given = Vec::new();
    for n in nodes {
        let c = AgentClient::new(cluster, n);
        let mut has = c
            .cluster()
            .with_context(|| format!("cannot read node `{}`'s directory", n.name))?
            .nodes;
        has.sort_by(|a, b| a.name.cmp(&b.name));
        if has != want {
            c.put_cluster(&body).with_context(|| {
                format!("cannot give node `{}` the cluster's directory", n.name)
            })?;
            given.push(n.name.to_string());
        }
    }
    Ok(given)
}
