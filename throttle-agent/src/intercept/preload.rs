//! The preload port: where the preload library in unmodified programs hands over their
//! connections to other nodes (no root needed on either side).
//!
//! The library connects the program's own socket here (127.0.0.1 or ::1, from the
//! program's source address) and sends a [`Request`]; see [`throttle_proto::preload`].
//! Only the agent's own user's programs are served (the client socket's owner is asked of
//! the kernel), unless the agent runs as root; each user holds at most a quarter of the
//! port's places while in its request, so that one user's idle connections cannot keep
//! the others' programs from connecting. The source carried to the other
//! node is the client socket's address as the kernel reports it, never a claim of the
//! library's: no program can make another node's programs see a source it does not own.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

use throttle_proto::preload::{ConnectReply, NodeList, PeerReply, Request, REQUEST_LEN};

use crate::limits::{Permit, Source};
use crate::serve::{self, AtStop};
use crate::shutdown::Shutdown;
use crate::state::Agent;
use crate::transport::wire::Code;
use throttle_proto::os::socket_table;

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Accept the preload library's connections until shutdown. A connection beyond
/// [`crate::limits::PRELOAD_HANDSHAKES`] in their request is reset at once (the library
/// then reports a timed-out connect, or an unreachable agent for its node list).
pub async fn serve(agent: Arc<Agent>, listener: TcpListener, shutdown: Shutdown) {
    let admitting = agent.clone();
    let admit = move |client: &TcpStream, from: SocketAddr| {
        // The client socket's owner, asked of the kernel for that one socket (before
        // anything else: the share, and whom a full port evicts, depend on it). A user is
        // served only by its own agent, or a root one.
        let me = nix::unistd::geteuid().as_raw();
        let owner = client
            .local_addr()
            .ok()
            .and_then(|local| socket_table::connection_owner(from, local));
        let refuse = |why: std::fmt::Arguments<'_>| {
            admitting.limits.note_refused();
            admitting.limits.warn_refusal(why);
            crate::transport::socket::reset_on_close(client.as_raw_fd());
        };
        let uid = match owner {
            Some(uid) if me == 0 || uid == me => uid,
            _ => {
                refuse(format_args!(
                    "preload connection from {from} refused: its socket belongs to uid {owner:?}, this agent serves uid {me} only"
                ));
                return None;
            }
        };
        let permit = admitting
            .limits
            .preload_handshakes
            .try_enter_from(Some(Source::Uid(uid)));
        match &permit {
            Some(p) => p.watch(client.as_raw_fd()),
            None => refuse(format_args!(
                "preload connection from {from} refused: the preload port is full, and uid {uid} has no connection of its own waiting there to give way"
            )),
        }
        permit
    };
    let handle = move |client: TcpStream, from: SocketAddr, handshake: Permit| {
        let agent = agent.clone();
        async move {
            let Ok(local) = client.local_addr() else {
                return;
            };
            if let Err(e) = handle(agent, client, from, local, handshake).await {
                debug!(%from, error = %e, "preload connection ended with an error");
            }
        }
    };
    serve::serve(
        "the preload port",
        listener,
        Some(shutdown),
        AtStop::Finish,
        admit,
        handle,
    )
    .await
}

/// The errno a program's `connect()` gets for a failure the agents met.
pub fn errno_for(code: Code) -> i32 {
    match code {
        Code::TargetRefused => libc::ECONNREFUSED,
        Code::TargetTimedOut => libc::ETIMEDOUT,
        Code::Forbidden | Code::Unauthorized => libc::EACCES,
        Code::Busy | Code::Refused => libc::EAGAIN,
        _ => libc::EHOSTUNREACH,
    }
}

async fn handle(
    agent: Arc<Agent>,
    mut client: TcpStream,
    from: SocketAddr,
    local: SocketAddr,
    handshake: Permit,
) -> std::io::Result<()> {
    let Some(state) = agent.intercept.as_ref() else {
        return Ok(());
    };
    let owner = socket_table::connection_owner(from, local);
    let mut buf = [0u8; REQUEST_LEN];
    match handshake
        .unless_evicted(tokio::time::timeout(
            REQUEST_TIMEOUT,
            client.read_exact(&mut buf),
        ))
        .await
    {
        Some(Ok(Ok(_))) => {}
        _ => return Ok(()),
    }
    let request = match Request::decode(&buf) {
        Ok(r) => r,
        Err(e) => {
            agent
                .limits
                .warn_refusal(format_args!("bad preload request from {from}: {e}"));
            crate::transport::socket::reset_on_close(client.as_raw_fd());
            return Ok(());
        }
    };
    drop(handshake);
    match request {
        Request::Nodes => client.write_all(&node_list(&agent).encode()).await,
        Request::Peer { via } => {
            let via = SocketAddr::new(via.ip().to_canonical(), via.port());
            let src = state
                .deliveries
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&via)
                .copied();
            client.write_all(&PeerReply { src }.encode()).await
        }
        Request::Connect { dst } => {
            let dst = SocketAddr::new(dst.ip().to_canonical(), dst.port());
            connect(&agent, state, client, from, owner, dst).await
        }
    }
}

/// A preloaded program's `connect` to `dst`: carried from the program's own address to
/// the other node's program, or refused with the errno the program's `connect` returns.
async fn connect(
    agent: &Arc<Agent>,
    state: &crate::state::interception::Interception,
    mut client: TcpStream,
    from: SocketAddr,
    owner: Option<u32>,
    dst: SocketAddr,
) -> std::io::Result<()> {
    let src = match carried_source(agent, from, owner) {
        Ok(src) => src,
        Err(why) => {
            agent.limits.warn_refusal(format_args!(
                "preload connection from {from} -> {dst} refused: {why}"
            ));
            return refuse(client, libc::EADDRNOTAVAIL).await;
        }
    };
    if !node_list(agent).intercepts(dst) {
        state
            .failed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        agent.limits.warn_refusal(format_args!(
            "preload connection {src} -> {dst} refused: not another node's program port"
        ));
        return refuse(client, libc::EHOSTUNREACH).await;
    }
    match super::outgoing::open(agent, src, dst).await {
        Ok(opened) => {
            client
                .write_all(&ConnectReply { errno: 0 }.encode())
                .await?;
            opened.carry(agent, client).await
        }
        Err(e) => refuse(client, errno_for(e.code)).await,
    }
}

/// Tell the library its `connect` fails with `errno`, then reset the connection.
async fn refuse(mut client: TcpStream, errno: i32) -> std::io::Result<()> {
    client.write_all(&ConnectReply { errno }.encode()).await?;
    crate::transport::socket::reset_on_close(client.as_raw_fd());
    Ok(())
}

/// The source carried to the other node for a program's socket that reached the preload
/// port from `from`: the program's own address, as the kernel saw it connect. A socket
/// bound to the wildcard address with a port reaches the port from loopback, and that
/// port on this node's address is the same reservation: it is carried as this node's
/// address. A socket bound to loopback itself (which could never reach another node
/// directly) does not own that port on this node's address: it is refused where another
/// user's listener holds it, so no program can pose as another user's service.
fn carried_source(
    agent: &Agent,
    from: SocketAddr,
    owner: Option<u32>,
) -> Result<SocketAddr, String> {
    let ip = from.ip().to_canonical();
    if !ip.is_loopback() {
        return Ok(SocketAddr::new(ip, from.port()));
    }
    let src = SocketAddr::new(agent.data_addr.ip().to_canonical(), from.port());
    match socket_table::listener_owner(src) {
        Some(holder) if Some(holder) != owner => Err(format!(
            "the program's socket is bound to {from}; {src} is another user's listener (uid {holder}), which it cannot speak for"
        )),
        _ => Ok(src),
    }
}

/// What the library sends through the agent: every other node's data address (IPv4 and
/// IPv6) whose agent proved the token there, except their agents' ports, and this node's
/// address for deliveries. In a loopback cluster the nodes' addresses are loopback ones
/// (127.0.1.1, ...); anywhere else a loopback address is never a node.
pub fn node_list(agent: &Agent) -> NodeList {
    let own = agent.data_addr.ip().to_canonical();
    let mut list = NodeList {
        own: Some(own),
        shared_stack: own.is_loopback(),
        kernel_pacing: agent.pacing.is_some(),
        ..NodeList::default()
    };
    let Some(state) = agent.intercept.as_ref() else {
        return list;
    };
    for n in agent.directory.nodes() {
        if n.name == agent.node || !state.is_proven(&n.name, n.data) {
            continue;
        }
        let ip = n.data.ip().to_canonical();
        // Loopback addresses are nodes only in a loopback cluster (this node's own address
        // is one): elsewhere a directory entry must not capture this host's own services.
        if ip == own
            || (ip.is_loopback() && !own.is_loopback())
            || ip.is_unspecified()
            || ip.is_multicast()
        {
            continue;
        }
        if let IpAddr::V4(v4) = ip {
            if v4.is_broadcast() {
                continue;
            }
        }
        list.nodes.push(ip);
        list.exempt.push(SocketAddr::new(ip, n.data.port()));
        list.exempt
            .push(SocketAddr::new(ip, agent.control_addr.port()));
    }
    list.nodes.sort();
    list.nodes.dedup();
    list.exempt.sort();
    list.exempt.dedup();
    list
}
