//! Blocking helpers for programs that talk through an agent's rank tunnels.
//!
//! A rank (1) listens somewhere, (2) [`register`]s that address with its node's agent and
//! keeps the returned connection open, (3) [`open_rank`]s streams to other ranks, and
//! (4) on each accepted connection calls [`read_incoming`] to learn who is calling.
//! Used by the workloads and by tests; no async runtime needed.
//!
//! [`dial_peer`] is the blocking form of an agent dialing another agent's data port (the
//! challenge-response included), for tools and tests that probe the data port.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use crate::auth::{self, Side, Token};
use crate::name::Name;
use crate::wire::{self, Answer, Code, PeerRequest, PeerWant, Request, WireError};

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

/// Send `req`; asks again (with backoff) while the agent answers `Busy`.
fn request(socket: &Path, req: &Request) -> Result<UnixStream, WireError> {
    let mut attempt = 0u32;
    loop {
        let mut s = connect(socket)?;
        // An agent that is full answers Busy and closes without reading: the write may
        // fail while its answer waits to be read.
        let sent = s.write_all(&req.encode());
        let answer = wire::read_reply_blocking(&mut s);
        let reply = match (sent, answer) {
            (_, Ok(r)) => r,
            (Err(e), Err(_)) => {
                return Err(WireError::new(
                    Code::PeerUnreachable,
                    format!("sending the handshake: {e}"),
                ))
            }
            (Ok(()), Err(e)) => return Err(e),
        };
        match reply.into_result() {
            Ok(()) => return Ok(s),
            Err(e) if e.code == Code::Busy && attempt < wire::BUSY_RETRIES => {
                attempt += 1;
                std::thread::sleep(wire::busy_backoff(attempt));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Open a stream from `src_rank` to `dst_rank` of `job`. The returned socket carries it.
pub fn open_rank(
    socket: &Path,
    job: &Name,
    src_rank: u32,
    dst_rank: u32,
) -> Result<UnixStream, WireError> {
    request(
        socket,
        &Request::OpenRank {
            job: job.clone(),
            src_rank,
            dst_rank,
        },
    )
}

/// Register where `rank` accepts streams (`unix:/path` or `tcp:host:port`). The rank stays
/// registered while the returned connection is open.
pub fn register(
    socket: &Path,
    job: &Name,
    rank: u32,
    accept: &str,
) -> Result<UnixStream, WireError> {
    request(
        socket,
        &Request::Register {
            job: job.clone(),
            rank,
            accept: accept.to_string(),
        },
    )
}

/// Who opened an accepted stream: `(job, src_rank, dst_rank)`.
pub fn read_incoming<R: std::io::Read>(stream: &mut R) -> Result<(Name, u32, u32), WireError> {
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

/// Dial a data port as node `src_node` would, for `want`, proving the token without
/// sending it. Returns the stream after the peer's `Ok`, or the peer's refusal.
pub fn dial_peer<S: Read + Write>(
    stream: &mut S,
    token: &Token,
    src_node: &Name,
    dialed: &Name,
    want: PeerWant,
) -> Result<(), WireError> {
    let io = |e: std::io::Error| WireError::new(Code::PeerUnreachable, e.to_string());
    let nonce = auth::nonce().map_err(io)?;
    let raw = Request::Peer(PeerRequest {
        src_node: src_node.clone(),
        nonce,
        want,
    })
    .encode();
    stream.write_all(&raw).map_err(io)?;
    let challenge = match wire::read_answer_blocking(stream)? {
        Answer::Challenge(c) => c,
        Answer::Reply(r) if r.code == Code::Ok => {
            return Err(WireError::new(
                Code::Unauthorized,
                "the other side said Ok without proving that it holds the token",
            ))
        }
        Answer::Reply(r) => return r.into_result(),
    };
    if !token.check_proof(
        Side::Server,
        &nonce,
        &challenge.nonce,
        dialed,
        &raw,
        &challenge.proof,
    ) {
        return Err(WireError::new(
            Code::Unauthorized,
            "the agent does not hold this token (its proof does not match)",
        ));
    }
    let proof = token.proof(Side::Client, &nonce, &challenge.nonce, dialed, &raw);
    stream.write_all(&proof).map_err(io)?;
    wire::read_reply_blocking(stream)?.into_result()
}
