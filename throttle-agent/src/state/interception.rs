//! Interception's part of the agent's state, as plain data: whether the kernel redirect
//! and the preload port are on, the counters `status` shows, the preload deliveries'
//! original sources, the nodes whose agents proved the token at their address, and the
//! address blocks the operator lets the agent capture. The rules written from it are
//! `intercept::rules`'s.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicU64;

use throttle_proto::name::Name;

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
    /// directory gives them ([`crate::intercept::members`]): only these are intercepted, so that a
    /// directory entry (any token holder writes them) cannot make this node capture its
    /// programs' traffic to a host outside the cluster.
    proven: std::sync::Mutex<std::collections::HashMap<Name, SocketAddr>>,
    /// Notified when the directory changes (the background proofs start a pass).
    pub directory_changed: tokio::sync::Notify,
    /// The addresses the operator lets this agent intercept (`--intercept-within`, by
    /// default the node's own subnet): a token holder's directory entry outside them is
    /// never captured, whatever agent proves the token there (one at an address shared with
    /// other users' services would otherwise receive their connections).
    pub within: Vec<Subnet>,
    /// Held while the kernel rules change: installs, updates and the removal at stop
    /// happen one at a time, each from the directory as it is then; `true` once stopped
    /// (no update may put the rules back after that).
    pub(crate) rules: std::sync::Mutex<bool>,
}

impl Interception {
    /// Whether `name`'s agent proved the token at `data`.
    pub fn is_proven(&self, name: &Name, data: SocketAddr) -> bool {
        let p = self.proven.lock().unwrap_or_else(|e| e.into_inner());
        p.get(name) == Some(&data)
    }

    /// Whether `ip` is an address this agent may intercept ([`Interception::within`]).
    pub fn may_capture(&self, ip: IpAddr) -> bool {
        self.within.iter().any(|s| s.contains(ip))
    }

    /// Record that `name`'s agent proved the token at `data`; whether that is new. An
    /// address outside [`Interception::within`] is never recorded.
    pub fn prove(&self, name: &Name, data: SocketAddr) -> bool {
        if !self.may_capture(data.ip()) {
            tracing::warn!(node = %name, %data,
                "not intercepting: the address is outside --intercept-within");
            return false;
        }
        let mut p = self.proven.lock().unwrap_or_else(|e| e.into_inner());
        p.insert(name.clone(), data) != Some(data)
    }

    /// Interception accepting redirected connections on `port` of 127.0.0.1 (kernel
    /// redirect) and/or the preload library's on `preload_port`, of the nodes within
    /// `within`.
    pub fn new(
        kernel_port: Option<u16>,
        preload_port: Option<u16>,
        within: Vec<Subnet>,
    ) -> Interception {
        Interception {
            kernel: kernel_port.is_some(),
            port: kernel_port.unwrap_or(0),
            preload_port,
            within,
            ..Interception::default()
        }
    }
}

/// A block of addresses, `ADDRESS/PREFIX` (`198.18.5.0/24`, `10.1.2.3/32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subnet {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Subnet {
    /// The block of `prefix` bits around `addr`.
    pub fn around(addr: IpAddr, prefix: u8) -> Subnet {
        Subnet { addr, prefix }
    }

    /// Whether `ip` lies in this block (IPv4-mapped IPv6 counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr.to_canonical(), ip.to_canonical()) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let bits = u32::from(self.prefix.min(32));
                let mask = if bits == 0 {
                    0
                } else {
                    u32::MAX << (32 - bits)
                };
                u32::from(a) & mask == u32::from(b) & mask
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let bits = u32::from(self.prefix.min(128));
                let mask = if bits == 0 {
                    0
                } else {
                    u128::MAX << (128 - bits)
                };
                u128::from(a) & mask == u128::from(b) & mask
            }
            _ => false,
        }
    }
}

impl std::str::FromStr for Subnet {
    type Err = String;
    fn from_str(s: &str) -> Result<Subnet, String> {
        let (addr, prefix) = s.split_once('/').unwrap_or((s, ""));
        let addr: IpAddr = addr.parse().map_err(|_| {
            format!("`{s}` is not an address block: ADDRESS/PREFIX, e.g. 198.18.5.0/24")
        })?;
        let most = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = if prefix.is_empty() {
            most
        } else {
            prefix
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= most)
                .ok_or_else(|| format!("`{s}`: the prefix must be 0 to {most}"))?
        };
        Ok(Subnet { addr, prefix })
    }
}

impl std::fmt::Display for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 35, finding 5: a token holder's directory entry at an address outside the
    /// cluster's (one shared with other users' services) is never captured, even when an
    /// agent there proves the token.
    #[test]
    fn only_addresses_within_the_operators_blocks_are_captured() {
        let i = Interception::new(Some(1), None, vec!["198.18.5.0/24".parse().unwrap()]);
        let n = |s: &str| Name::parse("node", s).unwrap();
        assert!(i.prove(&n("n1"), "198.18.5.2:7601".parse().unwrap()));
        assert!(i.is_proven(&n("n1"), "198.18.5.2:7601".parse().unwrap()));
        assert!(!i.prove(&n("evil"), "198.18.6.9:7601".parse().unwrap()));
        assert!(!i.is_proven(&n("evil"), "198.18.6.9:7601".parse().unwrap()));
        assert!(!i.may_capture("10.0.0.1".parse().unwrap()));
        assert!(!i.may_capture("::1".parse().unwrap()));
        // Parsing and the blocks' edges.
        let s: Subnet = "10.1.2.3/32".parse().unwrap();
        assert!(
            s.contains("10.1.2.3".parse().unwrap()) && !s.contains("10.1.2.4".parse().unwrap())
        );
        let s: Subnet = "10.0.0.0/8".parse().unwrap();
        assert!(
            s.contains("10.255.0.1".parse().unwrap()) && !s.contains("11.0.0.1".parse().unwrap())
        );
        assert!(s.contains("::ffff:10.1.1.1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Subnet>().is_err());
        assert!("host/24".parse::<Subnet>().is_err());
        assert_eq!("10.1.2.3".parse::<Subnet>().unwrap().prefix, 32);
        assert_eq!(s.to_string(), "10.0.0.0/8");
    }
}
