//! The receiving side of interception: checking an intercepted connection a peer agent
//! hands over on the data port and connecting to its destination on this node, from its
//! original source (a transparent socket) or, without root, from this node's address with
//! the original source recorded for the preload library.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use tokio::net::TcpStream;

use throttle_proto::os::socket_table;

use super::FIRST_PORT;
use crate::state::interception::Interception;
use crate::state::Agent;
use crate::transport::sockopt;
use crate::transport::wire::{Code, WireError};
use crate::transport::CONNECT_TIMEOUT;

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
            state.preload_port.unwrap_or(0),
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
    let owner = socket_table::listener_owner(dst);
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
