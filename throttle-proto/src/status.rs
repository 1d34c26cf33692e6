//! What an agent reports about itself (`GET /status`, `throttle-ctl status --json`).

use serde::{Deserialize, Serialize};

use crate::name::Name;
use crate::pct::Pct;
use crate::rate::Rate;

/// One node's link setting, traffic and holdings.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Status {
    pub node: Name,
    pub version: String,
    pub pct: Pct,
    #[serde(rename = "capacity_bytes_per_sec")]
    pub capacity: Rate,
    /// Bytes/s each direction may carry now; `null` when unlimited.
    pub limit_bytes_per_sec: Option<f64>,
    pub latency_us: u64,
    pub egress: DirectionStatus,
    pub ingress: DirectionStatus,
    pub open_streams: usize,
    pub registered_ranks: usize,
    /// Rank maps held (launched jobs and `PUT /jobs/{job}`).
    pub jobs: usize,
    pub forwards: usize,
    /// Jobs with ranks running on this node.
    pub running_jobs: usize,
    pub splice: bool,
    pub uptime_seconds: f64,
    /// Connections refused because a limit was reached.
    pub refused_connections: u64,
    /// Whether the control API speaks TLS.
    pub tls: bool,
    /// Transparent interception's counters; absent when the agent does not intercept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intercepted: Option<InterceptedStatus>,
}

/// Connections that transparent interception carried.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct InterceptedStatus {
    /// Connections from programs on this node to other nodes.
    pub outgoing: u64,
    /// Connections from other nodes delivered to programs on this node.
    pub incoming: u64,
    /// Intercepted connections that could not be carried (the program saw a reset, or
    /// with the preload library the errno a direct connection would have met).
    pub failed: u64,
    /// Whether the kernel redirect is on (`--intercept`).
    #[serde(default)]
    pub kernel: bool,
    /// The preload port, when the agent serves the preload library (`--preload`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preload_port: Option<u16>,
}

/// One direction of the link.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DirectionStatus {
    /// Payload bytes that crossed since the agent started.
    pub bytes: u64,
    /// Payload rate over the last sampling interval (250 ms).
    pub rate_bytes_per_sec: f64,
}
