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
//! Without root the same path is fed from user space ([`preload`]): the preload library
//! in the program hands its socket to the agent's preload port on loopback with the
//! destination, and the receiving agent, unable to use a transparent socket, connects from
//! its own address and tells the library in the receiving program the original source
//! (which its `accept()` and `getpeername()` then report).
//!
//! [`open`] is the one entry for an intercepted connection on the sending side; both the
//! kernel redirect ([`carry_outgoing`]) and the preload port use it. The agent's own
//! sockets to other agents carry a mark the redirect skips.

pub mod netfilter;
pub mod preload;
pub mod rules;
pub mod sockopt;

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

use throttle_proto::socket_table;

use crate::endpoint::Conn;
use crate::serve::{self, AtStop};
use crate::shutdown::Shutdown;
use crate::state::Agent;
use crate::transport::dial;
use crate::transport::wire::{Code, PeerWant, WireError};
use crate::transport::CONNECT_TIMEOUT;
use rules::Interception;

/// Accept redirected connections until shutdown. They are programs' connections of this
/// node, carried under the forwarded connections' pool (taken in [`open`]).
pub async fn serve(agent: Arc<Agent>, listener: TcpListener, shutdown: Shutdown) {
    let handle = move |client: TcpStream, from: SocketAddr, (): ()| {
        let agent = agent.clone();
        async move {
            if let Err(e) = carry_outgoing(agent, client, from).await {
                debug!(%from, error = %e, "intercepted connection ended with an error");
            }
        }
    };
    serve::serve(
        "interception port",
        listener,
        Some(shutdown),
        AtStop::Finish,
        |_: &TcpStream, _| Some(()),
        handle,
    )
    .await
}

/// Carry one connection the kernel redirected, from a program on this node (`src`) to
/// its original destination on another node, through both agents' links.
pub async fn carry_outgoing(
    agent: Arc<Agent>,
    client: TcpStream,
    src: SocketAddr,
) -> std::io::Result<()> {
    let Some(state) = agent.intercept.as_ref() else {
        return Ok(());
    };
    client.set_nodelay(true)?;
    let dst = match sockopt::original_destination(&client) {
        Ok(d) => d,
        Err(e) => {
            state.failed.fetch_add(1, Ordering::Relaxed);
            agent.limits.warn_refusal(format_args!(
                "a connection to the interception port from {src} was not redirected ({e})"
            ));
            crate::transport::socket::reset_on_close(client.as_raw_fd());
            return Ok(());
        }
    };
    match open(&agent, src, dst).await {
        Ok(opened) => opened.carry(&agent, client).await,
        Err(_) => {
            // The program sees a reset: the closest a redirected connection can get to the
            // error (it was accepted by the kernel before anyone knew).
            crate::transport::socket::reset_on_close(client.as_raw_fd());
            Ok(())
        }
    }
}

/// An intercepted connection whose far side is connected: the stream to the destination
/// node's agent, and the permit that counts it.
pub struct Opened {
    peer: TcpStream,
    _permit: crate::limits::Permit,
}

impl Opened {
    /// Copy between the program's socket and the destination's agent until both close.
    pub async fn carry(self, agent: &Agent, client: TcpStream) -> std::io::Result<()> {
        client.set_nodelay(true)?;
        let r = dial::carry(agent, Conn::Tcp(client), self.peer).await;
        drop(self._permit);
        r
    }
}

/// Open an intercepted connection from `src` (a program on this node) to `dst` (a
/// program on another node) through that node's agent: the one path for the kernel
/// redirect and the preload library. Counts it; a failure is counted, logged (rate
/// limited) and returned with the code that says what a direct connection would have met.
pub async fn open(agent: &Agent, src: SocketAddr, dst: SocketAddr) -> Result<Opened, WireError> {
    let Some(state) = agent.intercept.as_ref() else {
        return Err(WireError::new(
            Code::Forbidden,
            "this agent does not intercept connections",
        ));
    };
    let failed = |e: WireError| {
        state.failed.fetch_add(1, Ordering::Relaxed);
        agent
            .limits
            .warn_refusal(format_args!("intercepted connection {src} -> {dst}: {e}"));
        e
    };
    let Some(permit) = agent.limits.forwarded.try_enter(None) else {
        agent.limits.note_refused();
        return Err(failed(WireError::new(
            Code::Busy,
            "too many intercepted connections at once",
        )));
    };
    let Some(node) = agent
        .directory
        .node_at(dst.ip().to_canonical())
        .filter(|n| *n != agent.node)
    else {
        return Err(failed(WireError::new(
            Code::UnknownNode,
            format!("no other node has the address {}", dst.ip()),
        )));
    };
    match dial::dial(agent, &node, PeerWant::Intercepted { src, dst }).await {
        Ok(peer) => {
            state.outgoing.fetch_add(1, Ordering::Relaxed);
            debug!(%src, %dst, %node, "intercepted connection");
            Ok(Opened {
                peer,
                _permit: permit,
            })
        }
        Err(e) => Err(failed(e)),
    }
}

/// Lowest destination port interception carries: system services (ssh, NFS, anything a
/// firewall guards on the node's address) are neither redirected nor delivered.
pub const FIRST_PORT: u16 = 1024;

/// On the receiving node: check an intercepted connection's addresses and connect to its
/// destination from its original source. `src_node` has proved it holds the token and
/// dialed from `peer` (its data connection's address).
pub async fn deliver<'a>(
    agent: &'a Agent,
    src_node: &str,
    peer: std::net::IpAddr,
    src: SocketAddr,
    dst: SocketAddr,
) -> Result<(TcpStream, Option<Forget<'a>>), WireError> {
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
    if src.ip() != src_ip || peer.to_canonical() != src_ip || (state.kernel && !src.is_ipv4()) {
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
    if !state.kernel {
        return deliver_from_here(state, src, dst).await;
    }
    let connect = async {
        let socket = crate::transport::tcp_socket(dst)?;
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
        .map_err(|_| unreachable(src, dst, None))?
        .map_err(|e| unreachable(src, dst, Some(e)))?;
    let _ = conn.set_nodelay(true);
    state.incoming.fetch_add(1, Ordering::Relaxed);
    Ok((conn, None))
}

/// Why a delivery's connect failed, with the code that tells the sending side which errno
/// a direct connection would have given (`None`: timed out).
fn unreachable(src: SocketAddr, dst: SocketAddr, e: Option<std::io::Error>) -> WireError {
    let code = match &e {
        None => Code::TargetTimedOut,
        Some(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Code::TargetRefused,
        Some(_) => Code::TargetUnreachable,
    };
    let why = e.map_or("timed out".to_string(), |e| e.to_string());
    WireError::new(code, format!("cannot connect to {dst} from {src}: {why}"))
}

/// Deliver without a transparent socket (preload mode, no root): connect from this node's
/// own address and remember, for the preload library in the receiving program, which
/// original source that connection stands for. Only a listener of this agent's own user
/// may be reached this way (any user when the agent runs as root, as the kernel redirect
/// reaches any program): the connection comes from this host's address, which no other
/// user's service should be made to see for a remote program.
async fn deliver_from_here<'a>(
    state: &'a Interception,
    src: SocketAddr,
    dst: SocketAddr,
) -> Result<(TcpStream, Option<Forget<'a>>), WireError> {
    let me = nix::unistd::geteuid().as_raw();
    let owner = tokio::task::spawn_blocking(move || {
        socket_table::listener_owner_in(&socket_table::read(), dst)
    })
    .await
    .map_err(|e| WireError::new(Code::Internal, e.to_string()))?;
    match owner {
        None => {
            return Err(unreachable(
                src,
                dst,
                Some(std::io::ErrorKind::ConnectionRefused.into()),
            ))
        }
        Some(uid) if me != 0 && uid != me => {
            return Err(WireError::new(
                Code::Forbidden,
                format!(
                    "{dst} belongs to another user (uid {uid}): this agent (uid {me}) delivers intercepted connections only to its own user's programs"
                ),
            ))
        }
        Some(_) => {}
    }
    let socket = crate::transport::tcp_socket(dst).map_err(|e| unreachable(src, dst, Some(e)))?;
    socket
        .bind(SocketAddr::new(dst.ip(), 0))
        .map_err(|e| unreachable(src, dst, Some(e)))?;
    let via = socket
        .local_addr()
        .map_err(|e| unreachable(src, dst, Some(e)))?;
    // Known before the program can accept: its library asks at once.
    let table = || state.deliveries.lock().unwrap_or_else(|e| e.into_inner());
    table().insert(via, src);
    let forget = Forget { state, via };
    let conn = tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(dst))
        .await
        .map_err(|_| unreachable(src, dst, None))?
        .map_err(|e| unreachable(src, dst, Some(e)))?;
    let _ = conn.set_nodelay(true);
    state.incoming.fetch_add(1, Ordering::Relaxed);
    Ok((conn, Some(forget)))
}

/// A delivery's entry in the table, removed when the delivery fails or its connection
/// ends (held while the connection is carried).
pub struct Forget<'a> {
    state: &'a Interception,
    via: SocketAddr,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.state
            .deliveries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.via);
    }
}
