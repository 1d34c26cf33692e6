//! What an agent knows of the cluster: the other nodes' data addresses and, per job,
//! which node each rank runs on.
//!
//! The controller pushes both (`PUT /cluster`, `PUT /jobs/{job}`), so a node can join
//! without restarting the others. A rank stream is routed by looking its destination
//! rank up here; nothing is guessed: an unknown job, rank or node is an error code.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::RwLock;

use crate::transport::wire::{Code, WireError};
use throttle_proto::name::Name;

pub use throttle_proto::cluster::NodeEntry;

/// Nodes and jobs known to this agent.
#[derive(Debug, Default)]
pub struct Directory {
    nodes: RwLock<BTreeMap<Name, SocketAddr>>,
    jobs: RwLock<HashMap<Name, Vec<Name>>>,
}

/// Largest number of ranks a job may have; bounds what a request can make us store.
pub const MAX_RANKS: usize = 1 << 16;
/// Largest number of nodes in a directory.
pub const MAX_NODES: usize = 4096;
/// Largest number of rank maps held at once.
pub const MAX_JOB_MAPS: usize = 1024;
/// Largest number of ranks over all rank maps held at once.
pub const MAX_TOTAL_RANKS: usize = 1 << 20;

impl Directory {
    pub fn set_nodes(&self, nodes: &[NodeEntry]) {
        let mut map = self.nodes.write().unwrap_or_else(|e| e.into_inner());
        map.clear();
        for n in nodes {
            map.insert(n.name.clone(), n.data);
        }
    }

    pub fn nodes(&self) -> Vec<NodeEntry> {
        let map = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .map(|(name, data)| NodeEntry {
                name: name.clone(),
                data: *data,
            })
            .collect()
    }

    /// The data address of `node`.
    pub fn data_addr(&self, node: &str) -> Result<SocketAddr, WireError> {
        let map = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        map.get(node).copied().ok_or_else(|| {
            WireError::new(
                Code::UnknownNode,
                format!(
                    "node `{node}` is not in this agent's directory (known: {}); push the cluster with `throttle-ctl local up` or PUT /cluster",
                    map.keys().map(Name::as_str).collect::<Vec<_>>().join(", ")
                ),
            )
        })
    }

    /// Whether `ip` is the data address of a node in the directory.
    pub fn is_node_ip(&self, ip: std::net::IpAddr) -> bool {
        let map = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        let ip = ip.to_canonical();
        map.values().any(|a| a.ip().to_canonical() == ip)
    }

    /// The node whose data address is `ip`.
    pub fn node_at(&self, ip: std::net::IpAddr) -> Option<Name> {
        let map = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        let ip = ip.to_canonical();
        map.iter()
            .find(|(_, a)| a.ip().to_canonical() == ip)
            .map(|(n, _)| n.clone())
    }

    pub fn has_node(&self, node: &str) -> bool {
        let map = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        map.contains_key(node)
    }

    /// Record a job's rank-to-node map (index = rank). Refused (false) when the directory
    /// already holds [`MAX_JOB_MAPS`] other jobs.
    pub fn set_job(&self, job: &Name, ranks: Vec<Name>) -> bool {
        let mut jobs = self.jobs.write().unwrap_or_else(|e| e.into_inner());
        if jobs.len() >= MAX_JOB_MAPS && !jobs.contains_key(job) {
            return false;
        }
        let others: usize = jobs
            .iter()
            .filter(|(k, _)| *k != job)
            .map(|(_, v)| v.len())
            .sum();
        if others + ranks.len() > MAX_TOTAL_RANKS {
            return false;
        }
        jobs.insert(job.clone(), ranks);
        true
    }

    /// The rank map of `job`, if held.
    pub fn job(&self, job: &str) -> Option<Vec<Name>> {
        let jobs = self.jobs.read().unwrap_or_else(|e| e.into_inner());
        jobs.get(job).cloned()
    }

    /// How many rank maps are held (without copying them).
    pub fn job_count(&self) -> usize {
        self.jobs.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn remove_job(&self, job: &str) -> bool {
        let mut jobs = self.jobs.write().unwrap_or_else(|e| e.into_inner());
        jobs.remove(job).is_some()
    }

    pub fn jobs(&self) -> BTreeMap<Name, Vec<Name>> {
        let jobs = self.jobs.read().unwrap_or_else(|e| e.into_inner());
        jobs.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// The node that runs `rank` of `job`.
    pub fn node_of(&self, job: &str, rank: u32) -> Result<Name, WireError> {
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
        let n = |s: &str| Name::parse("name", s).unwrap();
        let d = Directory::default();
        d.set_nodes(&[NodeEntry {
            name: n("n0"),
            data: "127.0.1.1:1".parse().unwrap(),
        }]);
        assert!(d.set_job(&n("j"), vec![n("n0"), n("n1")]));
        assert_eq!(d.node_of("j", 1).unwrap(), n("n1"));
        assert_eq!(d.node_of("j", 2).unwrap_err().code, Code::UnknownRank);
        assert_eq!(d.node_of("k", 0).unwrap_err().code, Code::UnknownJob);
        let e = d.data_addr("n1").unwrap_err();
        assert_eq!(e.code, Code::UnknownNode);
        assert!(e.message.contains("n0"), "{e}");
        assert!(d.remove_job("j"));
        assert!(!d.remove_job("j"));
        for i in 0..MAX_JOB_MAPS {
            assert!(d.set_job(&n(&format!("j{i}")), vec![]));
        }
        assert!(!d.set_job(&n("one-too-many"), vec![]));
        assert!(
            d.set_job(&n("j0"), vec![n("n0")]),
            "replacing a held job is fine"
        );
    }
}
