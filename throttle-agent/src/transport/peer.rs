//! The data port: streams handed from one agent to another.
//!
//! An agent dials the destination node's agent ([`dial`]) and says what the stream is for
//! (a rank, a forward target, or a calibration sink). The two agents then prove to each
//! other that they hold the cluster token (challenge-response, `wire` and `auth`); the
//! token itself never crosses the network. The receiving side ([`serve`]) accepts a
//! request only from a node in its directory, and only for something that belongs to its
//! own node: a rank of a job that runs here, or an address of this node; never an
//! arbitrary host (the data port is not a relay). After an `Ok` both sides run the framed
//! copy loop through their own link ports.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, warn};

use super::pump::{self, Framing};
use super::wire::{
    self, Answer, Challenge, Code, PeerRequest, PeerWant, Reply, Request, WireError,
};
use super::{CONNECT_TIMEOUT, HANDSHAKE_TIMEOUT};
use crate::endpoint::Conn;
use crate::limits::Permit;
use crate::shutdown::Shutdown;
use crate::state::Agent;
use throttle_proto::auth::{self, Side};
use throttle_proto::name::Name;

/// Accept agent-to-agent streams until shutdown. Connections beyond the handshake limit
/// are refused at once with [`Code::Busy`] (never queued), so idle or slow clients cannot
/// starve the port.
pub async fn serve(agent: Arc<Agent>, listener: TcpListener, mut shutdown: Shutdown) {
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, from)) => {
                    // The cluster's own agents (they dial from their data address) share the
                    // whole pool; any other source gets at most a quarter of it.
                    let pool = &agent.limits.data_handshakes;
                    let permit = if agent.directory.is_node_ip(from.ip()) {
                        pool.try_enter_trusted()
                    } else {
                        pool.try_enter(Some(from.ip()))
                    };
                    let Some(permit) = permit else {
                        agent.limits.note_refused();
                        debug!(%from, "data port busy: refusing a connection");
                        let busy = Reply::from(WireError::new(Code::Busy, "too many connections in their handshake; try again"));
                        // A new socket's send buffer has room: answer without waiting.
                        let _ = stream.try_write(&busy.encode());
                        continue;
                    };
                    let agent = agent.clone();
                    tokio::spawn(async move {
                        if let Err(e) = handle(agent, stream, permit).await {
                            debug!(%from, error = %e, "peer stream ended with an error");
                        }
                    });
                }
                Err(e) => {
                    warn!(error = %e, "accept on the data port failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }
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
    let req = match tokio::time::timeout(HANDSHAKE_TIMEOUT, authenticate(&agent, &mut stream)).await
    {
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
            let conn =
                match super::delivery::accept_rank(&agent, &req.src_node, &job, src_rank, dst_rank)
                    .await
                {
                    Ok(c) => c,
                    Err(e) => return refuse(&mut stream, e).await,
                };
            wire::write_reply(&mut stream, &Reply::ok()).await?;
            carry(&agent, conn, stream).await
        }
        PeerWant::Forward { target } => {
            let conn = match connect_local_target(&agent, &target).await {
                Ok(c) => c,
                Err(e) => return refuse(&mut stream, e).await,
            };
            wire::write_reply(&mut stream, &Reply::ok()).await?;
            carry(&agent, Conn::Tcp(conn), stream).await
        }
        PeerWant::Intercepted { src, dst } => {
            let peer = match stream.peer_addr() {
                Ok(a) => a.ip(),
                Err(e) => return Err(e),
            };
            // `_delivery` keeps the preload library's record of the original source for as
            // long as the connection is carried.
            let (conn, _delivery) =
                match crate::intercept::deliver(&agent, &req.src_node, peer, src, dst).await {
                    Ok(c) => c,
                    Err(e) => return refuse(&mut stream, e).await,
                };
            wire::write_reply(&mut stream, &Reply::ok()).await?;
            carry(&agent, Conn::Tcp(conn), stream).await
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

/// Run the copy loop between a local application and a peer agent, through this node's
/// link: local -> peer is egress, peer -> local is ingress.
pub async fn carry(agent: &Agent, local: Conn, peer: TcpStream) -> std::io::Result<()> {
    let _open = agent.link.stream_opened();
    let ports = Some((&agent.link.egress, &agent.link.ingress));
    let opts = agent.pump;
    match &local {
        Conn::Unix(s) => pump::bridge(s, &peer, Framing::Framed, ports, opts).await?,
        Conn::Tcp(s) => pump::bridge(s, &peer, Framing::Framed, ports, opts).await?,
    };
    Ok(())
}

/// Connect to `target`, which must be an address of this node (see
/// [`super::forward::resolve_local_target`]).
pub async fn connect_local_target(agent: &Agent, target: &str) -> Result<TcpStream, WireError> {
    let addr = super::forward::resolve_local_target(agent, target).await?;
    let conn = tokio::time::timeout(CONNECT_TIMEOUT, super::connect(addr))
        .await
        .map_err(|_| {
            WireError::new(
                Code::TargetUnreachable,
                format!("connecting to {target} timed out"),
            )
        })?
        .map_err(|e| {
            WireError::new(
                Code::TargetUnreachable,
                format!("cannot connect to {target}: {e}"),
            )
        })?;
    let _ = conn.set_nodelay(true);
    Ok(conn)
}

/// Connect to another agent from this agent's data address (when it is a specific one),
/// so the peer sees the address its directory lists for this node, whatever route the
/// kernel would pick otherwise.
async fn connect_from_data_address(
    agent: &Agent,
    to: std::net::SocketAddr,
) -> std::io::Result<TcpStream> {
    let ip = agent.data_addr.ip();
    let socket = super::tcp_socket(to)?;
    if agent.intercept.as_ref().is_some_and(|i| i.kernel) {
        // The redirect rule must not send the agent's own connections back to itself.
        // (Only the kernel redirect has such a rule; SO_MARK needs CAP_NET_ADMIN, which an
        // ordinary user's agent serving the preload library does not have.)
        crate::intercept::sockopt::set_mark(&socket, crate::intercept::sockopt::EXEMPT_MARK)?;
    }
    if !ip.is_unspecified() && ip.is_ipv4() == to.is_ipv4() {
        socket.bind(std::net::SocketAddr::new(ip, 0))?;
    }
    socket.connect(to).await
}

/// Open a stream to `node`'s agent for `want`; returns it once both sides proved they hold
/// the token and the peer said `Ok`. A peer that is momentarily full (`Busy`: many streams
/// opening at once when a large job starts) is asked again, a few times, with backoff.
pub async fn dial(agent: &Agent, node: &Name, want: PeerWant) -> Result<TcpStream, WireError> {
    let mut attempt = 0u32;
    loop {
        match dial_once(agent, node, want.clone()).await {
            Err(e)
                if (e.code == Code::Busy || e.code == Code::Refused)
                    && attempt < super::BUSY_RETRIES =>
            {
                attempt += 1;
                tokio::time::sleep(super::busy_backoff(attempt)).await;
            }
            other => return other,
        }
    }
}

async fn dial_once(agent: &Agent, node: &Name, want: PeerWant) -> Result<TcpStream, WireError> {
    let addr = agent.directory.data_addr(node)?;
    let unreachable = |e: String| {
        WireError::new(
            Code::PeerUnreachable,
            format!("the agent of node `{node}` at {addr} is unreachable: {e}"),
        )
    };
    let nonce = auth::nonce().map_err(|e| WireError::new(Code::Internal, e.to_string()))?;
    let req = Request::Peer(PeerRequest {
        src_node: agent.node.clone(),
        nonce,
        want,
    });
    let raw = req.encode();
    let mut s = tokio::time::timeout(CONNECT_TIMEOUT, connect_from_data_address(agent, addr))
        .await
        .map_err(|_| unreachable("connect timed out".into()))?
        .map_err(|e| unreachable(e.to_string()))?;
    let _ = s.set_nodelay(true);
    // A peer that refused the connection at once (full pool) may have closed it before
    // reading the request: a write or read failing here is worth asking again.
    if let Err(e) = s.write_all(&raw).await {
        return match wire::read_answer(&mut s).await {
            Ok(Answer::Reply(r)) if r.code == Code::Busy => {
                Err(WireError::new(Code::Busy, r.message))
            }
            _ => Err(WireError::new(
                Code::Refused,
                format!("the agent of node `{node}` at {addr} dropped the connection: {e}"),
            )),
        };
    }
    let exchange = async {
        let challenge = match wire::read_answer(&mut s).await {
            Ok(Answer::Challenge(c)) => c,
            Ok(Answer::Reply(r)) if r.code == Code::Ok => {
                return Err(WireError::new(
                    Code::Unauthorized,
                    "the other side said Ok without proving that it holds the cluster token; it is not this cluster's agent",
                ))
            }
            Ok(Answer::Reply(r)) => return r.into_result(),
            Err(e) if e.code == Code::PeerUnreachable => {
                return Err(WireError::new(Code::Refused, e.message))
            }
            Err(e) => return Err(e),
        };
        if !agent.token.check_proof(
            Side::Server,
            &nonce,
            &challenge.nonce,
            node,
            &raw,
            &challenge.proof,
        ) {
            return Err(WireError::new(
                Code::Unauthorized,
                "the agent there does not hold this cluster's token (its proof does not match)",
            ));
        }
        let proof = agent
            .token
            .proof(Side::Client, &nonce, &challenge.nonce, node, &raw);
        s.write_all(&proof)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        wire::read_reply(&mut s).await?.into_result()
    };
    tokio::time::timeout(agent.register_timeout + HANDSHAKE_TIMEOUT, exchange)
        .await
        .map_err(|_| unreachable("no answer to the handshake".into()))?
        .map_err(|e| WireError::new(e.code, format!("node `{node}`: {}", e.message)))?;
    Ok(s)
}
