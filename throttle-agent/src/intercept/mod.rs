//! Transparent interception: unmodified programs' TCP connections to other nodes go
//! through the agents, with no forward rule and no change to the program.
//!
//! On the sending node the kernel redirects a program's connection to another node's
//! address into the agent ([`netfilter`]: nftables, `redirect` in the output hook); the
//! agent reads where it was going (SO_ORIGINAL_DST) and from where, and hands it to the
//! destination node's agent as [`PeerWant::Intercepted`] on the data port (authenticated
//! like every peer stream). The receiving agent checks that the source is the dialing
//! node's own address and the destination its own, then connects to the destination
//! *from the original source address and port* with a transparent socket, so the program
//! there sees its real peer (Open MPI's TCP BTL drops connections from unexpected
//! addresses). Both agents' links shape the stream: egress on the sender, ingress on the
//! receiver, like rank streams.
//!
//! [`carry_outgoing`] is the one entry for an intercepted connection on the sending side:
//! the kernel redirect feeds it here; a preload library can feed it through the local
//! endpoint later. The agent's own sockets to other agents carry a mark the redirect skips.

pub mod netfilter;
pub mod sockopt;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tracing::{debug, warn};

use crate::endpoint::Conn;
use crate::shutdown::Shutdown;
use crate::state::Agent;
use crate::transport::peer;
use crate::transport::wire::{Code, PeerWant, WireError};
use crate::transport::CONNECT_TIMEOUT;

/// Interception's state on one agent: the port the redirect sends connections to, and
/// counters for `status`.
#[derive(Debug, Default)]
pub struct Interception {
    /// Port on 127.0.0.1 that the redirect rule targets.
    pub port: u16,
    /// Connections from programs on this node intercepted and handed to another agent.
    pub outgoing: AtomicU64,
    /// Intercepted connections delivered to programs on this node.
    pub incoming: AtomicU64,
    /// Intercepted connections that could not be carried (no such node, peer refused).
    pub failed: AtomicU64,
    /// Held while the kernel rules change: installs, updates and the removal at stop
    /// happen one at a time, each from the directory as it is then; `true` once stopped
    /// (no update may put the rules back after that).
    rules: std::sync::Mutex<bool>,
}

impl Interception {
    /// Install the rules for the current directory (replacing leftovers of a crash).
    pub fn install(&self, agent: &Agent) -> Result<(), netfilter::RulesError> {
        let stopped = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        if *stopped {
            return Ok(());
        }
        netfilter::install(&self.redirect(agent))
    }

    /// Rewrite the rules after the directory changed (blocking: runs `nft`).
    pub fn update(&self, agent: &Agent) -> Result<(), netfilter::RulesError> {
        let stopped = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        if *stopped {
            return Ok(());
        }
        netfilter::update(&self.redirect(agent))
    }

    /// Remove the rules for good (agent stop).
    pub fn stop(&self) {
        let mut stopped = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        *stopped = true;
        netfilter::remove();
    }

    /// Interception accepting redirected connections on `port` of 127.0.0.1.
    pub fn new(port: u16) -> Interception {
        Interception {
            port,
            ..Interception::default()
        }
    }

    /// The redirect for the current directory: every other node's IPv4 data address,
    /// except its agent's data port and control API (assumed on the same port as this
    /// agent's, as deployments use one port for every node).
    pub fn redirect(&self, agent: &Agent) -> netfilter::Redirect {
        let mut r = netfilter::Redirect {
            port: self.port,
            ..netfilter::Redirect::default()
        };
        for n in agent.directory.nodes() {
            if n.name == agent.node {
                continue;
            }
            if let IpAddr::V4(ip) = n.data.ip().to_canonical() {
                // A directory entry (any token holder can write one) must not capture this
                // host's own loopback or broadcast traffic.
                if ip == own_ip(agent)
                    || ip.is_loopback()
                    || ip.is_unspecified()
                    || ip.is_multicast()
                    || ip.is_broadcast()
                {
                    continue;
                }
                r.nodes.push(ip);
                r.exempt.push((ip, n.data.port()));
                r.exempt.push((ip, agent.control_addr.port()));
            }
        }
        r.nodes.sort();
        r.nodes.dedup();
        r.exempt.sort();
        r.exempt.dedup();
        r
    }
}

fn own_ip(agent: &Agent) -> Ipv4Addr {
    match agent.data_addr.ip().to_canonical() {
        IpAddr::V4(ip) => ip,
        IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
    }
}

/// Accept redirected connections until shutdown.
pub async fn serve(agent: Arc<Agent>, listener: TcpListener, mut shutdown: Shutdown) {
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            accepted = listener.accept() => match accepted {
                Ok((client, from)) => {
                    let agent = agent.clone();
                    tokio::spawn(async move {
                        if let Err(e) = carry_outgoing(agent, client, from).await {
                            debug!(%from, error = %e, "intercepted connection ended with an error");
                        }
                    });
                }
                Err(e) => {
                    warn!(error = %e, "accept on the interception port failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// Carry one intercepted connection from a program on this node (`src`) to its original
/// destination on another node, through both agents' links.
pub async fn carry_outgoing(
    agent: Arc<Agent>,
    client: TcpStream,
    src: SocketAddr,
) -> std::io::Result<()> {
    let Some(state) = agent.intercept.as_ref() else {
        return Ok(());
    };
    client.set_nodelay(true)?;
    let refuse = |client: &TcpStream, why: String| {
        state.failed.fetch_add(1, Ordering::Relaxed);
        agent.limits.warn_refusal(format_args!("{why}"));
        crate::transport::socket::reset_on_close(client.as_raw_fd());
    };
    let Some(_permit) = agent.limits.forwarded.try_enter(None) else {
        agent.limits.note_refused();
        refuse(
            &client,
            "intercepted connection refused: too many at once".into(),
        );
        return Ok(());
    };
    let dst = match sockopt::original_destination(&client) {
        Ok(d) => d,
        Err(e) => {
            refuse(
                &client,
                format!(
                    "a connection to the interception port from {src} was not redirected ({e})"
                ),
            );
            return Ok(());
        }
    };
    let Some(node) = agent
        .directory
        .node_at(dst.ip())
        .filter(|n| *n != agent.node)
    else {
        refuse(
            &client,
            format!("intercepted connection to {dst}: no other node has that address"),
        );
        return Ok(());
    };
    match peer::dial(&agent, &node, PeerWant::Intercepted { src, dst }).await {
        Ok(peer_stream) => {
            state.outgoing.fetch_add(1, Ordering::Relaxed);
            debug!(%src, %dst, %node, "intercepted connection");
            peer::carry(&agent, Conn::Tcp(client), peer_stream).await
        }
        Err(e) => {
            // The program sees a reset: the closest a plain TCP program can get to the error.
            refuse(
                &client,
                format!("intercepted connection {src} -> {dst}: {e}"),
            );
            Ok(())
        }
    }
}

/// Lowest destination port interception carries: system services (ssh, NFS, anything a
/// firewall guards on the node's address) are neither redirected nor delivered.
pub const FIRST_PORT: u16 = 1024;

/// On the receiving node: check an intercepted connection's addresses and connect to its
/// destination from its original source. `src_node` has proved it holds the token and
/// dialed from `peer` (its data connection's address).
pub async fn deliver(
    agent: &Agent,
    src_node: &str,
    peer: std::net::IpAddr,
    src: SocketAddr,
    dst: SocketAddr,
) -> Result<TcpStream, WireError> {
    let canonical = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    let (src, dst) = (canonical(src), canonical(dst));
    let Some(state) = agent.intercept.as_ref() else {
        return Err(WireError::new(
            Code::Forbidden,
            format!(
                "node `{}` does not intercept connections (its agent runs without --intercept)",
                agent.node
            ),
        ));
    };
    let src_ip = agent.directory.data_addr(src_node)?.ip().to_canonical();
    // The source is the dialing agent's own address, the one it dialed from: nobody can
    // make this node's programs see a connection from an address of their choosing.
    if src.ip() != src_ip || peer.to_canonical() != src_ip || !src.is_ipv4() {
        return Err(WireError::new(
            Code::Forbidden,
            format!("an intercepted connection from node `{src_node}` must come from its address {src_ip}, and be handed over from there (source {src}, handed over from {peer})"),
        ));
    }
    if dst.ip() != agent.data_addr.ip().to_canonical()
        || dst.port() < FIRST_PORT
        || [
            agent.control_addr.port(),
            agent.data_addr.port(),
            state.port,
        ]
        .contains(&dst.port())
    {
        return Err(WireError::new(
            Code::Forbidden,
            format!(
                "{dst} is not a program's address on node `{}`: an intercepted connection may only reach this node's address at a port from {FIRST_PORT} up, never the agent or another host",
                agent.node
            ),
        ));
    }
    let unreachable = |e: String| {
        WireError::new(
            Code::TargetUnreachable,
            format!("cannot connect to {dst} from {src}: {e}"),
        )
    };
    let connect = async {
        let socket = TcpSocket::new_v4()?;
        sockopt::set_transparent(&socket)?;
        sockopt::set_mark(&socket, sockopt::TRANSPARENT_MARK)?;
        socket.set_reuseaddr(true)?;
        // The original port too, when it is free here (it is, unless this node's programs
        // use it towards the same destination) and not a privileged one (which some
        // services trust); else the original address alone.
        if src.port() < FIRST_PORT || socket.bind(src).is_err() {
            socket.bind(SocketAddr::new(src.ip(), 0))?;
        }
        socket.connect(dst).await
    };
    let conn = tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| unreachable("timed out".into()))?
        .map_err(|e| unreachable(e.to_string()))?;
    let _ = conn.set_nodelay(true);
    state.incoming.fetch_add(1, Ordering::Relaxed);
    Ok(conn)
}
