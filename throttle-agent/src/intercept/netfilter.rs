//! The kernel rules behind transparent interception: an nftables table that redirects a
//! program's TCP connections to the other nodes' addresses into the agent, and a policy
//! route that brings the replies of intercepted connections delivered on this node back to
//! the agent's transparent sockets.
//!
//! Everything is one table (`ip throttle`) replaced in one `nft` transaction, so the rules
//! are never half there, and a restarted agent replaces what a crashed one left. The
//! policy route is one `ip rule` and one route in table [`ROUTE_TABLE`], deleted before
//! they are added for the same reason. The `nft` and `ip` programs do the work (the
//! tools every operator has and can read the result of: `nft list table ip throttle`).

use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use crate::transport::sockopt::{EXEMPT_MARK, TRANSPARENT_MARK};

/// nftables table (family `ip`) that holds every rule of the agent.
pub const TABLE: &str = "throttle";
/// Policy routing table for the replies to transparent sockets.
pub const ROUTE_TABLE: u32 = 7471;

/// Why the rules could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("`{0}` is not installed (interception needs nftables' `nft` and iproute2's `ip`; Debian: apt-get install nftables iproute2)")]
    Missing(&'static str),
    #[error("`{command}` failed: {message}")]
    Failed { command: String, message: String },
}

fn run(program: &'static str, args: &[&str], stdin: Option<&str>) -> Result<(), RulesError> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => RulesError::Missing(program),
        _ => RulesError::Failed {
            command: format!("{program} {}", args.join(" ")),
            message: e.to_string(),
        },
    })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text.as_bytes());
    }
    let out = child.wait_with_output().map_err(|e| RulesError::Failed {
        command: program.to_string(),
        message: e.to_string(),
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(RulesError::Failed {
            command: format!("{program} {}", args.join(" ")),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// What the redirect applies to. Destination ports below 1024 are always exempt (system
/// services, ssh: a dead agent never locks anyone out, and nothing reaches a guarded
/// service through the agents).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Redirect {
    /// The other nodes' addresses: TCP to them goes to the agent...
    pub nodes: Vec<Ipv4Addr>,
    /// ...except to these (the other agents' control API and data port: a controller or
    /// `throttle-ctl` on this node must reach them directly).
    pub exempt: Vec<(Ipv4Addr, u16)>,
    /// The port on 127.0.0.1 the agent accepts redirected connections on.
    pub port: u16,
}

/// The whole table, as `nft -f` reads it: connections to the other nodes' addresses go to
/// the agent's port on this host's loopback, except the agent's own (marked) sockets, the
/// other agents' ports and ssh; connections made by transparent sockets get their replies
/// marked for the policy route.
pub fn ruleset(r: &Redirect) -> String {
    let port = r.port;
    let list = |items: Vec<String>| {
        if items.is_empty() {
            String::new()
        } else {
            format!("    elements = {{ {} }}\n", items.join(", "))
        }
    };
    let elements = list(r.nodes.iter().map(|a| a.to_string()).collect());
    let exempt = list(r.exempt.iter().map(|(a, p)| format!("{a} . {p}")).collect());
    format!(
        "add table ip {TABLE}\n\
         delete table ip {TABLE}\n\
         table ip {TABLE} {{\n\
         \x20 set nodes {{\n    type ipv4_addr\n{elements}  }}\n\
         \x20 set agents {{\n    type ipv4_addr . inet_service\n{exempt}  }}\n\
         \x20 chain to_agent {{\n\
         \x20   type nat hook output priority -100; policy accept;\n\
         \x20   meta mark {EXEMPT_MARK:#x} return\n\
         \x20   meta mark {TRANSPARENT_MARK:#x} return\n\
         \x20   ip daddr . tcp dport @agents return\n\
         \x20   tcp dport < 1024 return\n\
         \x20   ip daddr @nodes meta l4proto tcp redirect to :{port}\n\
         \x20 }}\n\
         \x20 chain reply_route {{\n\
         \x20   type route hook output priority -150; policy accept;\n\
         \x20   meta mark {TRANSPARENT_MARK:#x} ct mark set {TRANSPARENT_MARK:#x}\n\
         \x20   ct mark {TRANSPARENT_MARK:#x} meta mark set {TRANSPARENT_MARK:#x}\n\
         \x20 }}\n\
         }}\n"
    )
}

/// Install (or replace) the table and the policy route.
pub fn install(r: &Redirect) -> Result<(), RulesError> {
    run("nft", &["-f", "-"], Some(&ruleset(r)))?;
    let routed = install_route();
    if routed.is_err() {
        // No half-installed state: without the route, the redirect must not stay either.
        remove();
    }
    routed
}

fn install_route() -> Result<(), RulesError> {
    remove_route();
    let mark = format!("{TRANSPARENT_MARK:#x}");
    let table = ROUTE_TABLE.to_string();
    run(
        "ip",
        &["-4", "rule", "add", "fwmark", &mark, "lookup", &table],
        None,
    )?;
    run(
        "ip",
        &[
            "-4",
            "route",
            "replace",
            "local",
            "0.0.0.0/0",
            "dev",
            "lo",
            "table",
            &table,
        ],
        None,
    )
}

/// Replace the set of redirected addresses (the table is rewritten in one transaction).
pub fn update(r: &Redirect) -> Result<(), RulesError> {
    run("nft", &["-f", "-"], Some(&ruleset(r)))
}

fn remove_route() {
    let mark = format!("{TRANSPARENT_MARK:#x}");
    let table = ROUTE_TABLE.to_string();
    // One rule per earlier install that was not removed (a crash): delete until none.
    for _ in 0..16 {
        if run(
            "ip",
            &["-4", "rule", "del", "fwmark", &mark, "lookup", &table],
            None,
        )
        .is_err()
        {
            break;
        }
    }
    let _ = run("ip", &["-4", "route", "flush", "table", &table], None);
}

/// Remove the table and the policy route; what is already gone is no error.
pub fn remove() {
    let _ = run(
        "nft",
        &["-f", "-"],
        Some(&format!("add table ip {TABLE}\ndelete table ip {TABLE}\n")),
    );
    remove_route();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ruleset_redirects_only_the_other_nodes_and_exempts_the_agent() {
        let ip: Ipv4Addr = "198.18.0.2".parse().unwrap();
        let r = ruleset(&Redirect {
            nodes: vec![ip],
            exempt: vec![(ip, 7600), (ip, 7601)],
            port: 4000,
        });
        assert!(r.starts_with("add table ip throttle\ndelete table ip throttle\n"));
        assert!(r.contains("elements = { 198.18.0.2 }"));
        assert!(r.contains("elements = { 198.18.0.2 . 7600, 198.18.0.2 . 7601 }"));
        assert!(r.contains("redirect to :4000"));
        assert!(r.contains("meta mark 0x54480001 return"));
        assert!(r.contains("tcp dport < 1024 return"));
        // An empty set has no `elements` line (nft refuses `elements = { }`).
        assert!(!ruleset(&Redirect::default()).contains("elements"));
    }
}
