//! The data port: streams handed from one agent to another.
//!
//! An agent dials the destination node's agent ([`crate::dial`]) and says what the stream
//! is for (a rank, a forward target, an intercepted connection, a calibration sink, or a
//! kernel-paced node's flows).
//! The two agents then prove to each other that they hold the cluster token
//! (challenge-response, `wire` and `auth`); the token itself never crosses the network.
//! The receiving side ([`serve()`]) accepts a request only from a node in its directory,
//! and only for something that belongs to its own node: a rank of a job that runs here,
//! or an address of this node; never an arbitrary host (the data port is not a relay).
//! After an `Ok` both sides run the framed copy loop through their own link ports. This
//! module is the dispatcher into [`super::delivery`], [`super::target`],
//! [`super::pacing::receive`] and [`crate::intercept::incoming::deliver`]; nothing below it depends on it.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

use super::{delivery, target};
use crate::dial;
use crate::endpoint::Conn;
use crate::limits::Permit;
use crate::serve::{self, AtStop};
use crate::shutdown::Shutdown;
use crate::state::Agent;
use crate::transport::pump;
use crate::transport::wire::{
    self, Challenge, Code, PeerRequest, PeerWant, Reply, Request, WireError,
};
use crate::transport::HANDSHAKE_TIMEOUT;
use throttle_proto::auth::{self, Side};

/// Accept agent-to-agent streams until shutdown. Connections beyond the handshake limit
/// are refused at once with [`Code::Busy`] (never queued), so idle or slow clients cannot
/// starve the port.
pub async fn serve(agent: Arc<Agent>, listener: TcpListener, shutdown: Shutdown) {
    let admitting = agent.clone();
    let admit = move |stream: &TcpStream, from: SocketAddr| {
        // The cluster's own agents (they dial from their data address) share the whole
        // pool; any other source gets at most a quarter of it.
        let pool = &admitting.limits.data_handshakes;
        let permit = if admitting.directory.is_node_ip(from.ip()) {
            pool.try_enter_trusted(Some(from.ip()))
        } else {
            pool.try_enter(Some(from.ip()))
        };
        if let Some(p) = &permit {
            p.watch(std::os::fd::AsRawFd::as_raw_fd(stream));
        } else {
            admitting.limits.note_refused();
            debug!(%from, "data port busy: refusing a connection");
            let busy = Reply::from(WireError::new(
                Code::Busy,
                "too many connections in their handshake; try again",
            ));
            // A new socket's send buffer has room: answer without waiting.
            let _ = stream.try_write(&busy.encode());
        }
        permit
    };
    let handle = move |stream: TcpStream, from: SocketAddr, permit: Permit| {
        let agent = agent.clone();
        async move {
            if let Err(e) = handle(agent, stream, permit).await {
                debug!(%from, error = %e, "peer stream ended with an error");
            }
        }
    };
    serve::serve(
        "the data port",
        listener,
        Some(shutdown),
        AtStop::Finish,
        admit,
        handle,
    )
    .await
}

async fn refuse(stream: &mut TcpStream, e: WireError) -> std::io::Result<()> {
    debug!(error = %e, "refusing peer stream");
    wire::write_reply(stream, &Reply::from(e)).await?;
    stream.shutdown().await
}

/// Read the request and run the challenge-response; the authenticated request, or the
/// error to answer with.
async fn authenticate(agent: &Agent, stream: &mut TcpStream) -> Result<PeerRequest, WireError> {
    let req =
        match wire::read_request(stream).await? {
            Request::Peer(p) => p,
            _ => return Err(WireError::new(
                Code::Malformed,
                "the data port takes agent-to-agent requests only; ranks use the local endpoint",
            )),
        };
    let raw = Request::Peer(req.clone()).encode();
    let nonce = auth::nonce().map_err(|e| WireError::new(Code::Internal, e.to_string()))?;
    let challenge = Challenge {
        nonce,
        proof: agent
            .token
            .proof(Side::Server, &req.nonce, &nonce, &agent.node, &raw),
    };
    stream
        .write_all(&challenge.encode())
        .await
        .map_err(|e| WireError::new(Code::Malformed, format!("sending the challenge: {e}")))?;
    let mut proof = [0u8; wire::PROOF_LEN];
    stream
        .read_exact(&mut proof)
        .await
        .map_err(|e| WireError::new(Code::Malformed, format!("no proof came: {e}")))?;
    if !agent
        .token
        .check_proof(Side::Client, &req.nonce, &nonce, &agent.node, &raw, &proof)
    {
        return Err(WireError::new(
            Code::Unauthorized,
            "wrong cluster token (the proof does not match)",
        ));
    }
    if req.src_node == agent.node || !agent.directory.has_node(&req.src_node) {
        return Err(WireError::new(
            Code::Forbidden,
            format!(
                "node `{}` is not another node of this agent's cluster directory; peer streams are accepted only from the cluster's nodes",
                req.src_node
            ),
        ));
    }
    Ok(req)
}

async fn handle(
    agent: Arc<Agent>,
    mut stream: TcpStream,
    handshake: Permit,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let authenticated = tokio::time::timeout(HANDSHAKE_TIMEOUT, authenticate(&agent, &mut stream));
    let Some(authenticated) = handshake.unless_evicted(authenticated).await else {
        debug!("a peer connection was evicted in its handshake for a newcomer");
        return Ok(());
    };
    let req = match authenticated {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            if e.code == Code::Unauthorized || e.code == Code::Forbidden {
                agent.limits.warn_refusal(format_args!(
                    "refused a peer request from {:?}: {e}",
                    stream.peer_addr().ok()
                ));
            }
            return refuse(&mut stream, e).await;
        }
        Err(_) => {
            return refuse(
                &mut stream,
                WireError::new(Code::Malformed, "no handshake within the time limit"),
            )
            .await
        }
    };
    drop(handshake);
    // A node that proved the token from its own address is one interception may capture.
    if let Ok(from) = stream.peer_addr() {
        crate::intercept::members::proven_by_peer(&agent, &req.src_node, from.ip());
    }
    // Intercepted connections can be opened by any user of any node: they draw from the
    // forwarded connections' pool, never from the rank streams'.
    let pool = match req.want {
        PeerWant::Intercepted { .. } => &agent.limits.forwarded,
        _ => &agent.limits.streams,
    };
    let Some(_stream_permit) = pool.try_enter(None) else {
        agent.limits.note_refused();
        return refuse(
            &mut stream,
            WireError::new(Code::Busy, "this agent carries as many streams as it may"),
        )
        .await;
    };
    match req.want {
        PeerWant::Rank {
            job,
            src_rank,
            dst_rank,
        } => {
            let conn = match delivery::accept_rank(&agent, &req.src_node, &job, src_rank, dst_rank)
                .await
            {
                Ok(c) => c,
                Err(e) => return refuse(&mut stream, e).await,
            };
            wire::write_reply(&mut stream, &Reply::ok()).await?;
            dial::carry(&agent, conn, stream).await
        }
        PeerWant::Forward { target } => {
            let conn = match target::connect_local_target(&agent, &target).await {
                Ok(c) => c,
                Err(e) => return refuse(&mut stream, e).await,
            };
            wire::write_reply(&mut stream, &Reply::ok()).await?;
            dial::carry(&agent, Conn::Tcp(conn), stream).await
        }
        PeerWant::Intercepted { src, dst } => {
            let peer = match stream.peer_addr() {
                Ok(a) => a.ip(),
                Err(e) => return Err(e),
            };
            // `_delivery` keeps the preload library's record of the original source for as
            // long as the connection is carried.
            let (conn, _delivery) =
                match crate::intercept::incoming::deliver(&agent, &req.src_node, peer, src, dst)
                    .await
                {
                    Ok(c) => c,
                    Err(e) => return refuse(&mut stream, e).await,
                };
            wire::write_reply(&mut stream, &Reply::ok()).await?;
            dial::carry(&agent, Conn::Tcp(conn), stream).await
        }
        PeerWant::Flows => {
            if agent.pacing.is_none() {
                return refuse(
                    &mut stream,
                    WireError::new(
                        Code::Forbidden,
                        format!("node `{}` does not pace links in the kernel (its agent runs with --links proxy)", agent.node),
                    ),
                )
                .await;
            }
            wire::write_reply(&mut stream, &Reply::ok()).await?;
            super::pacing::receive(&agent, &req.src_node, stream).await
        }
        PeerWant::Sink => {
            wire::write_reply(&mut stream, &Reply::ok()).await?;
            let (bytes, secs) = pump::discard(&stream, &agent.link.ingress).await?;
            let mut out = [0u8; 16];
            out[..8].copy_from_slice(&bytes.to_be_bytes());
            out[8..].copy_from_slice(&secs.to_be_bytes());
            stream.write_all(&out).await
        }
    }
}
