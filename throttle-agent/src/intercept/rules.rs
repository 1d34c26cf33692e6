//! The redirect rules, written from the cluster directory and interception's state
//! (`state::interception`): installed at start, rewritten when the directory changes,
//! removed for good at stop, one change at a time.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use throttle_proto::name::Name;

use super::netfilter;
use crate::directory::Directory;
use crate::state::interception::Interception;
use crate::state::Agent;

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

impl<'a> Here<'a> {
    /// Where `agent` is, for its rules.
    pub fn of(agent: &'a Agent) -> Here<'a> {
        Here {
            node: &agent.node,
            directory: &agent.directory,
            data_addr: agent.data_addr,
            control_port: agent.control_addr.port(),
        }
    }
}

/// Install the rules for the current directory (replacing leftovers of a crash).
pub fn install(i: &Interception, here: &Here) -> Result<(), netfilter::RulesError> {
    let stopped = i.rules.lock().unwrap_or_else(|e| e.into_inner());
    if *stopped || !i.kernel {
        return Ok(());
    }
    netfilter::install(&redirect(i, here))
}

/// Rewrite the rules after the directory changed (blocking: runs `nft`).
pub fn update(i: &Interception, here: &Here) -> Result<(), netfilter::RulesError> {
    let stopped = i.rules.lock().unwrap_or_else(|e| e.into_inner());
    if *stopped || !i.kernel {
        return Ok(());
    }
    netfilter::update(&redirect(i, here))
}

/// Remove the rules for good (agent stop).
pub fn stop(i: &Interception) {
    let mut stopped = i.rules.lock().unwrap_or_else(|e| e.into_inner());
    *stopped = true;
    if i.kernel {
        netfilter::remove();
    }
}

/// The redirect for the current directory: every other node's IPv4 data address whose
/// agent proved the token there, except its agent's data port and control API (assumed on the same port as this
/// agent's, as deployments use one port for every node).
pub fn redirect(i: &Interception, here: &Here) -> netfilter::Redirect {
    let mut r = netfilter::Redirect {
        port: i.port,
        ..netfilter::Redirect::default()
    };
    for n in here.directory.nodes() {
        if n.name == *here.node || !i.is_proven(&n.name, n.data) {
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

fn own_ip(data_addr: SocketAddr) -> Ipv4Addr {
    match data_addr.ip().to_canonical() {
        IpAddr::V4(ip) => ip,
        IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
    }
}
