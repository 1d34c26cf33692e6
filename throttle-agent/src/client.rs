//! Blocking helpers for programs that talk through an agent's rank tunnels.
//!
//! A rank (1) listens somewhere, (2) [`register`]s that address with its node's agent and
//! keeps the returned connection open, (3) [`open_rank`]s streams to other ranks, and
//! (4) on each accepted connection calls [`read_incoming`] to learn who is calling.
//! Used by the workloads and by tests; no async runtime needed.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;

use crate::transport::wire::{self, Code, Request, WireError};

fn connect(socket: &Path) -> Result<UnixStream, WireError> {
    UnixStream::connect(socket).map_err(|e| {
        WireError::new(
            Code::PeerUnreachable,
            format!(
                "cannot reach the agent's local endpoint {}: {e} (is the agent running?)",
                socket.display()
            ),
        )
    })
}

fn request(socket: &Path, req: &Request) -> Result<UnixStream, WireError> {
    let mut s = connect(socket)?;
    s.write_all(&req.encode()).map_err(|e| {
        WireError::new(Code::PeerUnreachable, format!("sending the handshake: {e}"))
    })?;
    wire::read_reply_blocking(&mut s)?.into_result()?;
    Ok(s)
}

/// Open a stream from `src_rank` to `dst_rank` of `job`. The returned socket carries it.
pub fn open_rank(
    socket: &Path,
    job: &str,
    src_rank: u32,
    dst_rank: u32,
) -> Result<UnixStream, WireError> {
    request(
        socket,
        &Request::OpenRank {
            job: job.to_string(),
            src_rank,
            dst_rank,
        },
    )
}

/// Register where `rank` accepts streams (`unix:/path` or `tcp:host:port`). The rank stays
/// registered while the returned connection is open.
pub fn register(
    socket: &Path,
    job: &str,
    rank: u32,
    accept: &str,
) -> Result<UnixStream, WireError> {
    request(
        socket,
        &Request::Register {
            job: job.to_string(),
            rank,
            accept: accept.to_string(),
        },
    )
}

/// Who opened an accepted stream: `(job, src_rank, dst_rank)`.
pub fn read_incoming<R: std::io::Read>(stream: &mut R) -> Result<(String, u32, u32), WireError> {
    match wire::read_request_blocking(stream)? {
        Request::Incoming {
            job,
            src_rank,
            dst_rank,
        } => Ok((job, src_rank, dst_rank)),
        other => Err(WireError::new(
            Code::Malformed,
            format!("expected an Incoming header, got {other:?}"),
        )),
    }
}
