//! The data port: streams handed from one agent to another.
//!
//! An agent dials the destination node's agent ([`dial`]), authenticates with the cluster
//! token and says what the stream is for (a rank, a forward target, or a calibration
//! sink). The receiving side ([`serve`]) checks the token, connects locally and answers;
//! after an `Ok` both sides run the framed copy loop through their own link ports.

use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, warn};

use super::pump::{self, Framing};
use super::wire::{self, Code, Reply, Request, WireError};
use super::{CONNECT_TIMEOUT, HANDSHAKE_TIMEOUT};
use crate::agent::{Agent, Shutdown};
use crate::endpoint::Conn;

/// Accept agent-to-agent streams until shutdown.
pub async fn serve(agent: Arc<Agent>, listener: TcpListener, mut shutdown: Shutdown) {
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, from)) => {
                    let agent = agent.clone();
                    tokio::spawn(async move {
                        if let Err(e) = handle(agent, stream).await {
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

async fn handle(agent: Arc<Agent>, mut stream: TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let req = match tokio::time::timeout(HANDSHAKE_TIMEOUT, wire::read_request(&mut stream)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return refuse(&mut stream, e).await,
        Err(_) => {
            return refuse(
                &mut stream,
                WireError::new(Code::Malformed, "no handshake within the time limit"),
            )
            .await
        }
    };
    let token = match &req {
        Request::PeerRank { token, .. }
        | Request::PeerForward { token, .. }
        | Request::PeerSink { token, .. } => token,
        _ => return refuse(
            &mut stream,
            WireError::new(
                Code::Malformed,
                "the data port takes agent-to-agent requests only; ranks use the local endpoint",
            ),
        )
        .await,
    };
    if !agent.token.matches(token) {
        return refuse(
            &mut stream,
            WireError::new(Code::Unauthorized, "wrong cluster token"),
        )
        .await;
    }
    match req {
        Request::PeerRank {
            job,
            src_rank,
            dst_rank,
            ..
        } => {
            let conn = match agent.connect_rank(&job, src_rank, dst_rank).await {
                Ok(c) => c,
                Err(e) => return refuse(&mut stream, e).await,
            };
            wire::write_reply(&mut stream, &Reply::ok()).await?;
            carry(&agent, conn, stream).await
        }
        Request::PeerForward { target, .. } => {
            let conn = match connect_target(&target).await {
                Ok(c) => c,
                Err(e) => return refuse(&mut stream, e).await,
            };
            wire::write_reply(&mut stream, &Reply::ok()).await?;
            carry(&agent, Conn::Tcp(conn), stream).await
        }
        Request::PeerSink { .. } => {
            wire::write_reply(&mut stream, &Reply::ok()).await?;
            let (bytes, secs) = pump::discard(&stream, &agent.link.ingress).await?;
            let mut out = [0u8; 16];
            out[..8].copy_from_slice(&bytes.to_be_bytes());
            out[8..].copy_from_slice(&secs.to_be_bytes());
            stream.write_all(&out).await
        }
        _ => Ok(()),
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

/// Connect to a forward target on this node.
pub async fn connect_target(target: &str) -> Result<TcpStream, WireError> {
    let conn = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(target))
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

/// Open a stream to `node`'s agent for `req`; returns it once the peer said `Ok`.
pub async fn dial(agent: &Agent, node: &str, req: &Request) -> Result<TcpStream, WireError> {
    let addr = agent.directory.data_addr(node)?;
    let unreachable = |e: String| {
        WireError::new(
            Code::PeerUnreachable,
            format!("the agent of node `{node}` at {addr} is unreachable: {e}"),
        )
    };
    let mut s = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&addr))
        .await
        .map_err(|_| unreachable("connect timed out".into()))?
        .map_err(|e| unreachable(e.to_string()))?;
    let _ = s.set_nodelay(true);
    s.write_all(&req.encode())
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let reply = tokio::time::timeout(
        agent.register_timeout + HANDSHAKE_TIMEOUT,
        wire::read_reply(&mut s),
    )
    .await
    .map_err(|_| unreachable("no answer to the handshake".into()))??;
    reply
        .into_result()
        .map_err(|e| WireError::new(e.code, format!("node `{node}`: {}", e.message)))?;
    Ok(s)
}
