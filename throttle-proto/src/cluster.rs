//! The cluster as the agents see it: node names and their data addresses
//! (`GET`/`PUT /cluster`).

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::name::Name;

/// One node: its name and where its agent's data port listens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    pub name: Name,
    /// Address of the node agent's data port.
    #[serde(deserialize_with = "ip_port")]
    pub data: SocketAddr,
}

/// The body of `GET`/`PUT /cluster`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterNodes {
    pub nodes: Vec<NodeEntry>,
}

fn ip_port<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(|_| {
        serde::de::Error::custom(format!(
            "data address `{}` must be IP:PORT, e.g. 10.0.0.1:7601",
            s.escape_debug()
        ))
    })
}
