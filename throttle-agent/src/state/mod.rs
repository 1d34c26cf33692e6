//! The state every service of an agent shares: its node, link, directory, registry,
//! forwards, interception, launcher and limits. Plain data that knows no service: the
//! parts only services fill ([`forwards`], [`interception`]) are defined here too, and
//! the services (`dial`, `intercept`, `services`, `api`) depend on this module and
//! `agent.rs` on them, never the other way.

pub mod forwards;
pub mod interception;
pub mod paced;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use throttle_proto::auth::Token;
use throttle_proto::name::Name;

use crate::directory::Directory;
use crate::launch::jobs::Launcher;
use crate::limits::Limits;
use crate::link::LeasedLink;
use crate::registry::Registry;
use crate::transport::pump::PumpOptions;
use forwards::Forwards;
use interception::Interception;

/// The state every service of the agent shares.
#[derive(Debug)]
pub struct Agent {
    pub node: Name,
    /// Where the control API and the data port are bound (a forward may not target them).
    pub control_addr: SocketAddr,
    pub data_addr: SocketAddr,
    pub limits: Limits,
    /// Whether the control API speaks TLS.
    pub tls: bool,
    /// The link, and the one door to its shape (with the lease a run sets).
    pub link: LeasedLink,
    pub token: Token,
    pub directory: Directory,
    pub registry: Arc<Registry>,
    pub forwards: Forwards,
    /// Forwards may reach loopback-only services and ports under 1024, and listen on
    /// ports under 1024 (the operator's `--open-forwards`).
    pub open_forwards: bool,
    pub pump: PumpOptions,
    pub register_timeout: Duration,
    pub started: Instant,
    pub launcher: Arc<Launcher>,
    /// Transparent interception (`--intercept`), when on.
    pub intercept: Option<Interception>,
    /// Kernel-paced links (`--links kernel`), when on: the program sockets paced here and
    /// every node's flows.
    pub pacing: Option<paced::Pacing>,
}
