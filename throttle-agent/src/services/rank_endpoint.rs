//! The local endpoint: a Unix socket where the ranks on this node open streams to other
//! ranks of their job and register where they accept streams.
//!
//! Streams to a rank on this node are connected directly and not shaped (like shared
//! memory under MPI); streams to another node go through [`crate::dial::dial`] and this
//! node's link.

use std::path::Path;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tracing::debug;

use crate::dial;
use crate::endpoint::{Conn, Endpoint};
use crate::limits::Permit;
use crate::serve::{self, AtStop};
use crate::shutdown::Shutdown;
use crate::state::Agent;
use crate::transport::pump::{self, Framing};
use crate::transport::wire::{self, Code, PeerWant, Reply, Request, WireError};
use crate::transport::HANDSHAKE_TIMEOUT;
use throttle_proto::name::Name;

/// Bind the local endpoint at `path` (owner-only permissions), replacing a stale socket.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!(
                    "{} is in use by a running agent; stop it or choose another --local-socket",
                    path.display()
                ),
            ));
        }
        std::fs::remove_file(path)?;
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            // A directory we create is private (mode 0700); one that exists is the
            // operator's choice, but the jobs' run directories inside it are checked.
            crate::launch::private_dir::ensure(dir)?;
        }
    }
    let listener = UnixListener::bind(path)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Accept local connections until shutdown.
pub async fn serve(agent: Arc<Agent>, listener: UnixListener, shutdown: Shutdown) {
    let admitting = agent.clone();
    let admit = move |stream: &UnixStream, (): ()| {
        let permit = admitting.limits.local_handshakes.try_enter(None);
        if permit.is_none() {
            admitting.limits.note_refused();
            let busy = Reply::from(WireError::new(
                Code::Busy,
                "the agent holds as many local connections in their handshake as it may; try again",
            ));
            let _ = stream.try_write(&busy.encode());
        }
        permit
    };
    let handle = move |stream: UnixStream, (): (), handshake: Permit| {
        let agent = agent.clone();
        async move {
            if let Err(e) = handle(agent, stream, handshake).await {
                debug!(error = %e, "local stream ended with an error");
            }
        }
    };
    serve::serve(
        "the local endpoint",
        listener,
        Some(shutdown),
        AtStop::Finish,
        admit,
        handle,
    )
    .await
}

async fn refuse(stream: &mut UnixStream, e: WireError) -> std::io::Result<()> {
    debug!(error = %e, "refusing local request");
    wire::write_reply(stream, &Reply::from(e)).await?;
    stream.shutdown().await
}

async fn handle(
    agent: Arc<Agent>,
    mut stream: UnixStream,
    handshake: Permit,
) -> std::io::Result<()> {
    let read = tokio::time::timeout(HANDSHAKE_TIMEOUT, wire::read_request(&mut stream));
    let Some(read) = handshake.unless_evicted(read).await else {
        return Ok(()); // evicted for a newcomer while idle in its handshake
    };
    let req = match read {
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
    drop(handshake);
    match req {
        Request::OpenRank {
            job,
            src_rank,
            dst_rank,
        } => {
            // A stream holds descriptors for its life; a registration holds one socket
            // and is bounded by the registry instead.
            let Some(_stream) = agent.limits.streams.try_enter(None) else {
                agent.limits.note_refused();
                return refuse(
                    &mut stream,
                    WireError::new(Code::Busy, "this agent carries as many streams as it may"),
                )
                .await;
            };
            open_rank(agent, stream, &job, src_rank, dst_rank).await
        }
        Request::Register { job, rank, accept } => {
            register(agent, stream, &job, rank, &accept).await
        }
        _ => {
            refuse(
                &mut stream,
                WireError::new(
                    Code::Malformed,
                    "the local endpoint takes OpenRank and Register requests only",
                ),
            )
            .await
        }
    }
}

async fn open_rank(
    agent: Arc<Agent>,
    mut stream: UnixStream,
    job: &Name,
    src_rank: u32,
    dst_rank: u32,
) -> std::io::Result<()> {
    let route = agent
        .directory
        .node_of(job, dst_rank)
        .and_then(|node| agent.directory.node_of(job, src_rank).map(|_| node));
    let node = match route {
        Ok(n) => n,
        Err(e) => return refuse(&mut stream, e).await,
    };
    if node == agent.node {
        let conn = match super::delivery::connect_rank(&agent, job, src_rank, dst_rank).await {
            Ok(c) => c,
            Err(e) => return refuse(&mut stream, e).await,
        };
        wire::write_reply(&mut stream, &Reply::ok()).await?;
        let opts = agent.pump;
        match &conn {
            Conn::Unix(c) => pump::bridge(&stream, c, Framing::Raw, None, opts).await?,
            Conn::Tcp(c) => pump::bridge(&stream, c, Framing::Raw, None, opts).await?,
        };
        return Ok(());
    }
    let want = PeerWant::Rank {
        job: job.clone(),
        src_rank,
        dst_rank,
    };
    let peer_stream = match dial::dial(&agent, &node, want).await {
        Ok(s) => s,
        Err(e) => return refuse(&mut stream, e).await,
    };
    wire::write_reply(&mut stream, &Reply::ok()).await?;
    dial::carry(&agent, Conn::Unix(stream), peer_stream).await
}

async fn register(
    agent: Arc<Agent>,
    mut stream: UnixStream,
    job: &Name,
    rank: u32,
    accept: &str,
) -> std::io::Result<()> {
    let endpoint = match Endpoint::parse(accept) {
        Ok(e) => e,
        Err(msg) => return refuse(&mut stream, WireError::new(Code::Malformed, msg)).await,
    };
    let registration = match agent.registry.register(job, rank, endpoint) {
        Ok(r) => r,
        Err(e) => return refuse(&mut stream, e).await,
    };
    wire::write_reply(&mut stream, &Reply::ok()).await?;
    // Registered for as long as the rank keeps this connection open.
    let mut buf = [0u8; 64];
    loop {
        match crate::transport::socket::read_some(&stream, &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => continue,
        }
    }
    drop(registration);
    Ok(())
}
