//! The state every service of an agent shares: its node, link, directory, registry,
//! forwards, launcher and limits.
//!
//! Kept apart from `agent.rs` (configuration and start-up) so that the services
//! (`transport`, `api`) depend on this module and `agent.rs` on them, never the other way.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use throttle_proto::auth::Token;
use throttle_proto::name::Name;

use crate::directory::Directory;
use crate::intercept::rules::{Here, Interception};
use crate::launch::jobs::Launcher;
use crate::limits::Limits;
use crate::link::LeasedLink;
use crate::registry::Registry;
use crate::services::forwards::Forwards;
use crate::transport::pump::PumpOptions;

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
}

impl Agent {
    /// What interception's rules are written from.
    pub fn here(&self) -> Here<'_> {
        Here {
            node: &self.node,
            directory: &self.directory,
            data_addr: self.data_addr,
            control_port: self.control_addr.port(),
        }
    }
}
