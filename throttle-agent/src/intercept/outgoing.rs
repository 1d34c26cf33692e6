//! The sending side of interception: opening an intercepted connection to the
//! destination node's agent (the one path for the kernel redirect and the preload port),
//! and carrying the program's socket over it.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use tokio::net::TcpStream;
use tracing::debug;

use crate::dial;
use crate::endpoint::Conn;
use crate::state::Agent;
use crate::transport::wire::{Code, PeerWant, WireError};

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
