//! What an agent reports about itself (`GET /status`, `throttle-ctl status --json`).

use serde::{Deserialize, Serialize};

pub use crate::pacing::{LateBucket, PacingStatus};

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
    /// Seconds left of the shape's lease (a run's setting, renewed by its controller);
    /// absent when the shape holds until changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape_lease_left_s: Option<f64>,
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
    /// Connections refused because a limit was reached, or evicted from a full pool
    /// before they proved themselves (a flood of idle connections shows here).
    pub refused_connections: u64,
    /// Whether the control API speaks TLS.
    pub tls: bool,
    /// Whether the agent itself got the CPU it needed (absent from agents before 0.3).
    #[serde(default)]
    pub cpu: AgentCpu,
    /// Transparent interception's counters; absent when the agent does not intercept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intercepted: Option<InterceptedStatus>,
    /// Kernel-paced links (`--links kernel`); absent when the agents carry the bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_pacing: Option<KernelPacingStatus>,
}

/// The program sockets an agent with kernel-paced links paces, since it started.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct KernelPacingStatus {
    /// Sockets paced now, and registered in all.
    pub paced_now: u64,
    pub registered: u64,
    /// Registrations refused (a connecting socket refused is carried by the agent).
    pub refused: u64,
    /// Sockets between nodes that sent unpaced: accepted ones the agent could not pace,
    /// and paced ones it could no longer read while their program held them.
    pub unpaced: u64,
    /// Payload bytes the paced sockets sent (acknowledged) and received.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Of those, the bytes beyond what the node's link carries at its setting: the paced
    /// sockets' traffic held to a token bucket of the link's rate, as often as the agent
    /// reads them (a real link's traffic never exceeds it; the kernel's can, when it lets
    /// a message's first segment burst go unpaced).
    #[serde(default)]
    pub beyond_link_sent: u64,
    #[serde(default)]
    pub beyond_link_received: u64,
    /// Rates changed as shares moved.
    pub rate_changes: u64,
    /// Seconds the sockets open now were limited by their peer's receive window, and by
    /// their own send buffer (`TCP_INFO`).
    pub rwnd_limited_seconds: f64,
    pub sndbuf_limited_seconds: f64,
    /// The device whose egress queue holds the paced sockets to the link's rate
    /// (`--egress-device`; a namespace host's `eth0`), null without one.
    #[serde(default)]
    pub egress_queue: Option<String>,
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
    /// Other nodes of the directory whose connections are not intercepted (yet): no agent
    /// proved the cluster token at their address. Asked again in the background.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_proven: Vec<crate::name::Name>,
    /// Other nodes of the directory at addresses outside the blocks the operator lets this
    /// agent intercept (`--intercept-within`): never intercepted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside: Vec<crate::name::Name>,
}

/// One direction of the link.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DirectionStatus {
    /// Payload bytes that crossed since the agent started.
    pub bytes: u64,
    /// Payload rate over the last sampling interval (250 ms).
    pub rate_bytes_per_sec: f64,
    /// How faithfully the pacing ran (absent from agents before 0.3: all zero).
    #[serde(default)]
    pub pacing: PacingStatus,
}

/// Whether the agent got the CPU it needed, since it started.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct AgentCpu {
    /// Seconds the agent's threads were ready to run but waited for a CPU (the
    /// scheduler's run-queue delay, `/proc/self/task/*/schedstat`; threads that ended are
    /// not counted). Missing on kernels without scheduler statistics: 0.
    pub run_delay_seconds: f64,
    /// How the agent is scheduled as it runs (what `--priority` obtained): its nice value
    /// (-10 for `high`), and whether it runs under a real-time policy (`realtime`).
    /// Missing from agents before 0.4.
    #[serde(default)]
    pub nice: Option<i32>,
    #[serde(default)]
    pub realtime: Option<bool>,
}

impl AgentCpu {
    /// Whether the agent runs ahead of ordinary processes (raised or real-time); `None`
    /// from an agent that does not say.
    pub fn raised(&self) -> Option<bool> {
        match (self.realtime, self.nice) {
            (Some(true), _) => Some(true),
            (_, Some(n)) => Some(n < 0),
            _ => None,
        }
    }
}
