//! What an agent knows of the cluster: the other nodes' data addresses and, per job,
//! which node each rank runs on.
//!
//! The controller pushes both (`PUT /cluster`, `PUT /jobs/{job}`), so a node can join
//! without restarting the others. A rank stream is routed by looking its destination
//! rank up here; nothing is guessed: an unknown job, rank or node is an error code.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};

use crate::transport::wire::{Code, WireError};

/// One node as the agents see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEntry {
    pub name: String,
    /// Address of the node agent's data port (`host:port`).
    pub data: String,
}

/// Nodes and jobs known to this agent.
#[derive(Debug, Default)]
pub struct Directory {
    nodes: RwLock<BTreeMap<String, String>>,
    jobs: RwLock<HashMap<String, Vec<String>>>,
}

/// Largest number of ranks a job may have; bounds what a request can make us store.
pub const MAX_RANKS: usize = 1 << 16;

impl Directory {
    pub fn set_nodes(&self, nodes: &[NodeEntry]) {
        let mut map = self.nodes.write().unwrap_or_else(|e| e.into_inner());
        map.clear();
        for n in nodes {
            map.insert(n.name.clone(), n.data.clone());
        }
    }

    pub fn nodes(&self) -> Vec<NodeEntry> {
        let map = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .map(|(name, data)| NodeEntry {
                name: name.clone(),
                data: data.clone(),
            })
            .collect()
    }

    /// The data address of `node`.
    pub fn data_addr(&self, node: &str) -> Result<String, WireError> {
        let map = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        map.get(node).cloned().ok_or_else(|| {
            WireError::new(
                Code::UnknownNode,
                format!(
                    "node `{node}` is not in this agent's directory (known: {}); push the cluster with `throttle-ctl local up` or PUT /cluster",
                    map.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )
        })
    }

    pub fn has_node(&self, node: &str) -> bool {
        let map = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        map.contains_key(node)
    }

    /// Record a job's rank-to-node map (index = rank).
    pub fn set_job(&self, job: &str, ranks: Vec<String>) {
        let mut jobs = self.jobs.write().unwrap_or_else(|e| e.into_inner());
        jobs.insert(job.to_string(), ranks);
    }

    pub fn remove_job(&self, job: &str) -> bool {
        let mut jobs = self.jobs.write().unwrap_or_else(|e| e.into_inner());
        jobs.remove(job).is_some()
    }

    pub fn jobs(&self) -> BTreeMap<String, Vec<String>> {
        let jobs = self.jobs.read().unwrap_or_else(|e| e.into_inner());
        jobs.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// The node that runs `rank` of `job`.
    pub fn node_of(&self, job: &str, rank: u32) -> Result<String, WireError> {
        let jobs = self.jobs.read().unwrap_or_else(|e| e.into_inner());
        let ranks = jobs.get(job).ok_or_else(|| {
            WireError::new(
                Code::UnknownJob,
                format!("job `{job}` is not known to this agent (was it launched, or already finished?)"),
            )
        })?;
        ranks.get(rank as usize).cloned().ok_or_else(|| {
            WireError::new(
                Code::UnknownRank,
                format!(
                    "job `{job}` has ranks 0..{}, there is no rank {rank}",
                    ranks.len()
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_ranks_and_names_what_is_unknown() {
        let d = Directory::default();
        d.set_nodes(&[NodeEntry {
            name: "n0".into(),
            data: "127.0.1.1:1".into(),
        }]);
        d.set_job("j", vec!["n0".into(), "n1".into()]);
        assert_eq!(d.node_of("j", 1).unwrap(), "n1");
        assert_eq!(d.node_of("j", 2).unwrap_err().code, Code::UnknownRank);
        assert_eq!(d.node_of("k", 0).unwrap_err().code, Code::UnknownJob);
        let e = d.data_addr("n1").unwrap_err();
        assert_eq!(e.code, Code::UnknownNode);
        assert!(e.message.contains("n0"), "{e}");
        assert!(d.remove_job("j"));
        assert!(!d.remove_job("j"));
    }
}
