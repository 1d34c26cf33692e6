//! Interception's state on one agent, as plain data: whether the kernel redirect and the
//! preload port are on, the counters `status` shows, the preload deliveries' original
//! sources, and the nftables rules written from the cluster directory (never from the
//! agent's services: they depend on this module, not the reverse).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::AtomicU64;

use throttle_proto::name::Name;

use super::netfilter;
use crate::directory::Directory;

/// What the redirect rules are written from: this node, its directory, and where its
/// agent listens.
pub struct Here<'a> {
    pub node: &'a Name,
    pub directory: &'a Directory,
    /// The agent's data address (its IPv4 address is this node's: never captured).
    pub data_addr: SocketAddr,
    /// The control API's port (exempt on every node, assumed the same everywhere).
    pub control_port: u16,
}

/// Interception's state on one agent: the port the redirect sends connections to, and
/// counters for `status`.
#[derive(Debug, Default)]
pub struct Interception {
    /// Whether the kernel redirect is on (`--intercept`): its rules are installed, and
    /// deliveries use transparent sockets (the program sees its real peer without help).
    pub kernel: bool,
    /// Port on 127.0.0.1 that the redirect rule targets (0 without the kernel redirect).
    pub port: u16,
    /// The preload port (`--preload`), when on.
    pub preload_port: Option<u16>,
    /// Deliveries made without a transparent socket: the agent-side address of each
    /// (this node's address and the port it connected from) and the original source.
    pub deliveries: std::sync::Mutex<std::collections::HashMap<SocketAddr, SocketAddr>>,
    /// Connections from programs on this node intercepted and handed to another agent.
    pub outgoing: AtomicU64,
    /// Intercepted connections delivered to programs on this node.
    pub incoming: AtomicU64,
    /// Intercepted connections that could not be carried (no such node, peer refused).
    pub failed: AtomicU64,
    /// The other nodes whose agents proved the cluster token at the data address the
    /// directory gives them ([`super::members`]): only these are intercepted, so that a
    /// directory entry (any token holder writes them) cannot make this node capture its
    /// programs' traffic to a host outside the cluster.
    proven: std::sync::Mutex<std::collections::HashMap<Name, SocketAddr>>,
    /// Notified when the directory changes (the background proofs start a pass).
    pub directory_changed: tokio::sync::Notify,
    /// Held while the kernel rules change: installs, updates and the removal at stop
    /// happen one at a time, each from the directory as it is then; `true` once stopped
    /// (no update may put the rules back after that).
    rules: std::sync::Mutex<bool>,
}

impl Interception {
    /// Install the rules for the current directory (replacing leftovers of a crash).
    pub fn install(&self, here: &Here) -> Result<(), netfilter::RulesError> {
        let stopped = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        if *stopped || !self.kernel {
            return Ok(());
        }
        netfilter::install(&self.redirect(here))
    }

    /// Rewrite the rules after the directory changed (blocking: runs `nft`).
    pub fn update(&self, here: &Here) -> Result<(), netfilter::RulesError> {
        let stopped = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        if *stopped || !self.kernel {
            return Ok(());
        }
        netfilter::update(&self.redirect(here))
    }

    /// Remove the rules for good (agent stop).
    pub fn stop(&self) {
        let mut stopped = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        *stopped = true;
        if self.kernel {
            netfilter::remove();
        }
    }

    /// Whether `name`'s agent proved the token at `data`.
    pub fn is_proven(&self, name: &Name, data: SocketAddr) -> bool {
        let p = self.proven.lock().unwrap_or_else(|e| e.into_inner());
        p.get(name) == Some(&data)
    }

    /// Record that `name`'s agent proved the token at `data`; whether that is new.
    pub fn prove(&self, name: &Name, data: SocketAddr) -> bool {
        let mut p = self.proven.lock().unwrap_or_else(|e| e.into_inner());
        p.insert(name.clone(), data) != Some(data)
    }

    /// Interception accepting redirected connections on `port` of 127.0.0.1 (kernel
    /// redirect) and/or the preload library's on `preload_port`.
    pub fn new(kernel_port: Option<u16>, preload_port: Option<u16>) -> Interception {
        Interception {
            kernel: kernel_port.is_some(),
            port: kernel_port.unwrap_or(0),
            preload_port,
            ..Interception::default()
        }
    }

    /// The redirect for the current directory: every other node's IPv4 data address whose
    /// agent proved the token there, except its agent's data port and control API (assumed on the same port as this
    /// agent's, as deployments use one port for every node).
    pub fn redirect(&self, here: &Here) -> netfilter::Redirect {
        let mut r = netfilter::Redirect {
            port: self.port,
            ..netfilter::Redirect::default()
        };
        for n in here.directory.nodes() {
            if n.name == *here.node || !self.is_proven(&n.name, n.data) {
                continue;
            }
            if let IpAddr::V4(ip) = n.data.ip().to_canonical() {
                // A directory entry (any token holder can write one) must not capture this
                // host's own loopback or broadcast traffic.
                if ip == own_ip(here.data_addr)
                    || ip.is_loopback()
                    || ip.is_unspecified()
                    || ip.is_multicast()
                    || ip.is_broadcast()
                {
                    continue;
                }
                r.nodes.push(ip);
                r.exempt.push((ip, n.data.port()));
                r.exempt.push((ip, here.control_port));
            }
        }
        r.nodes.sort();
        r.nodes.dedup();
        r.exempt.sort();
        r.exempt.dedup();
        r
    }
}

fn own_ip(data_addr: SocketAddr) -> Ipv4Addr {
    match data_addr.ip().to_canonical() {
        IpAddr::V4(ip) => ip,
        IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
    }
}
