//! The client side of agent-to-agent streams: dialling another node's agent on its data
//! port (the challenge-response handshake, from this agent's data address, retried while
//! the peer is busy), and carrying a local connection over the stream through this node's
//! link. Every service that sends a stream to another node uses this; the data port's
//! server side is [`crate::services::peer`]. Below the services and interception, above
//! the transport and the state.

use std::net::SocketAddr;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::endpoint::Conn;
use crate::state::Agent;
use crate::transport::pump::{self, Framing};
use crate::transport::wire::{self, Answer, Code, PeerRequest, PeerWant, Request, WireError};
use crate::transport::{CONNECT_TIMEOUT, HANDSHAKE_TIMEOUT};
use throttle_proto::auth::{self, Side};
use throttle_proto::name::Name;

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

/// Connect to another agent from this agent's data address (when it is a specific one),
/// so the peer sees the address its directory lists for this node, whatever route the
/// kernel would pick otherwise.
async fn connect_from_data_address(
    agent: &Agent,
    to: std::net::SocketAddr,
) -> std::io::Result<TcpStream> {
    let ip = agent.data_addr.ip();
    let socket = crate::transport::tcp_socket(to)?;
    if agent.intercept.as_ref().is_some_and(|i| i.kernel) {
        // The redirect rule must not send the agent's own connections back to itself.
        // (Only the kernel redirect has such a rule; SO_MARK needs CAP_NET_ADMIN, which an
        // ordinary user's agent serving the preload library does not have.)
        crate::transport::sockopt::set_mark(&socket, crate::transport::sockopt::EXEMPT_MARK)?;
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
        match dial_once(agent, node, want.clone(), Finish::Stream).await {
            Err(e)
                if (e.code == Code::Busy || e.code == Code::Refused)
                    && attempt < crate::transport::BUSY_RETRIES =>
            {
                attempt += 1;
                tokio::time::sleep(crate::transport::busy_backoff(attempt)).await;
            }
            other => return other,
        }
    }
}

/// Whether `node`'s agent answers at its directory address with a proof that it holds
/// this cluster's token and is `node`: the handshake up to this node's own proof, whatever
/// the peer answers then (it need not know this node yet). What interception asks before it captures
/// connections to an address ([`crate::intercept::members`]).
pub async fn prove(agent: &Agent, node: &Name, at: SocketAddr) -> Result<(), WireError> {
    dial_once(agent, node, PeerWant::Sink, Finish::AtPeersProof(at))
        .await
        .map(drop)
}

/// How far [`dial_once`] goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Finish {
    /// The whole handshake, with the node at its directory address: both proofs and the
    /// peer's answer.
    Stream,
    /// With the node at this address (the one to be recorded as proven, whatever the
    /// directory says meanwhile): stop once the peer proved itself and this node's proof
    /// is sent.
    AtPeersProof(SocketAddr),
}

async fn dial_once(
    agent: &Agent,
    node: &Name,
    want: PeerWant,
    finish: Finish,
) -> Result<TcpStream, WireError> {
    let addr = match finish {
        Finish::AtPeersProof(at) => at,
        Finish::Stream => agent.directory.data_addr(node)?,
    };
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
        if matches!(finish, Finish::AtPeersProof(_)) {
            // The peer proved itself; it learns of this node from the proof just sent
            // (whatever it answers: it may not know this node yet).
            return Ok(());
        }
        wire::read_reply(&mut s).await?.into_result()
    };
    tokio::time::timeout(agent.register_timeout + HANDSHAKE_TIMEOUT, exchange)
        .await
        .map_err(|_| unreachable("no answer to the handshake".into()))?
        .map_err(|e| WireError::new(e.code, format!("node `{node}`: {}", e.message)))?;
    Ok(s)
}
