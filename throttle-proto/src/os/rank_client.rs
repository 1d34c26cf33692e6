//! Blocking helpers for programs that talk through an agent's rank tunnels.
//!
//! A rank (1) listens somewhere, (2) [`register`]s that address with its node's agent and
//! keeps the returned connection open, (3) [`open_rank`]s streams to other ranks, and
//! (4) on each accepted connection calls [`read_incoming`] to learn who is calling.
//! Used by the workloads and by tests; no async runtime needed.
//!
//! With direct links (the agent pacing the programs' own sockets, `--links kernel` with
//! its egress queue), a rank connects to another node's rank itself and [`pace`]s the
//! socket: the agent sets its rate, and the kernel carries the bytes.
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

/// How long a pacing registration may take: the agent answers at once.
const PACE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Register this process's TCP socket `fd`, connected (or about to be) to `peer` on
/// another node, with the pacing socket `name` (an abstract Unix name,
/// [`crate::preload::pace_socket_name`], which the agent passes its ranks); `Ok` once the
/// agent set its rate. Anyone may bind an abstract name, so the listener must be this
/// user's or root's (`SO_PEERCRED`): a stranger's listener learns nothing but a descriptor
/// number and a peer, and cannot take the socket (that needs what tracing this process
/// needs).
pub fn pace(
    name: &str,
    fd: std::os::fd::RawFd,
    peer: std::net::SocketAddr,
    side: crate::preload::PaceSide,
) -> std::io::Result<()> {
    use crate::preload::{PaceReply, PaceRequest, CONNECT_REPLY_LEN};
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    let mut s = UnixStream::connect_addr(&addr)?;
    s.set_read_timeout(Some(PACE_TIMEOUT))?;
    s.set_write_timeout(Some(PACE_TIMEOUT))?;
    let owner = peer_uid(&s)?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if owner != me && owner != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("the pacing socket @{name} is uid {owner}'s, not this user's ({me}) or root's"),
        ));
    }
    s.write_all(&PaceRequest { side, fd, peer }.encode())?;
    let mut b = [0u8; CONNECT_REPLY_LEN];
    s.read_exact(&mut b)?;
    match PaceReply::decode(&b).errno {
        0 => Ok(()),
        e => Err(std::io::Error::from_raw_os_error(e)),
    }
}

/// The user of the process at the other end of `s`.
fn peer_uid(s: &UnixStream) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given; the descriptor is
    // the open socket `s` borrows.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
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
