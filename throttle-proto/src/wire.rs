//! The small binary handshake that opens every stream of the proxy transport.
//!
//! Every connection to an agent's local endpoint or data port starts with one
//! [`Request`] and is answered with one [`Reply`]; after an `Ok` reply the connection
//! carries the stream's bytes. Keeping the format in one module (with its own tests)
//! means ranks, agents and the workloads' communicator all speak exactly the same thing.
//!
//! ```text
//! request:   "THRT" | version u8 | kind u8 | body_len u16 BE | body
//! reply:     "THRR" | version u8 | code u8 | msg_len u16 BE  | msg (UTF-8)
//! challenge: "THRC" | version u8 | 0       | 64 u16 BE       | server nonce [32] | server proof [32]
//! body fields: str = u16 BE length + UTF-8, u32 BE, nonce = 32 bytes
//! then, between agents, frames: len u32 BE | lateness us u32 BE | payload (len 0: end)
//! ```
//!
//! Agent-to-agent requests ([`Request::Peer`]) never carry the cluster token. The dialer
//! sends its request with a fresh nonce; the receiver answers with a [`Challenge`] (its
//! own nonce and a proof that it holds the token); the dialer checks that proof and sends
//! its own (32 bytes); only then does the receiver act and [`Reply`]. A proof is an
//! HMAC-SHA256 keyed with the token over both nonces, the dialed node's name and the
//! request's bytes (`auth::Token::proof`), so what crosses the network cannot be replayed,
//! redirected to another node, or turned into the token.
//!
//! Parsing is sans-IO: [`request_body_len`], [`Request::decode`], [`answer_body_len`] and
//! [`Answer::decode`] are pure functions of bytes; the blocking readers below and the
//! agent's async readers (`throttle_agent::transport::wire`) only move bytes into them.
//! Lengths are bounded ([`MAX_BODY`], per-field limits) so a hostile peer cannot make the
//! agent allocate; names pass the [`Name`] grammar here, at
//! the edge; a malformed request gets a reply with an error code, then the close.

use std::io;

use crate::name::Name;

pub const REQUEST_MAGIC: [u8; 4] = *b"THRT";
pub const REPLY_MAGIC: [u8; 4] = *b"THRR";
pub const CHALLENGE_MAGIC: [u8; 4] = *b"THRC";
/// Version 2: peer requests authenticate by challenge-response instead of carrying the
/// token. Version 3: frames between agents carry the sender's pacing lateness.
pub const VERSION: u8 = 3;

/// Bytes of a frame header on a leg between two agents, once the handshake is done:
/// the payload length (u32 BE; 0 marks the clean end of the direction) and how late the
/// sending agent let the frame go after its pacing departure (u32 BE, microseconds). The
/// receiving agent credits that lateness, so a sender's late wake-up is not paid a second
/// time at the receiver's ingress.
pub const FRAME_HEADER_LEN: usize = 8;

/// The most lateness a frame header carries (longer is sent as this).
pub const MAX_FRAME_LATENESS: std::time::Duration = std::time::Duration::from_secs(1);

/// A frame header.
pub fn frame_header(len: u32, late: std::time::Duration) -> [u8; FRAME_HEADER_LEN] {
    let us = late.min(MAX_FRAME_LATENESS).as_micros() as u32;
    let mut h = [0u8; FRAME_HEADER_LEN];
    h[..4].copy_from_slice(&len.to_be_bytes());
    h[4..].copy_from_slice(&us.to_be_bytes());
    h
}

/// The length and the lateness of a frame header (a lateness beyond
/// [`MAX_FRAME_LATENESS`], which no agent sends, is read as that).
pub fn parse_frame_header(h: &[u8; FRAME_HEADER_LEN]) -> (u32, std::time::Duration) {
    let len = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    let us = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    let late = std::time::Duration::from_micros(us as u64).min(MAX_FRAME_LATENESS);
    (len, late)
}
/// Every message starts with a header of this many bytes.
pub const HEADER_LEN: usize = 8;
/// Largest request body accepted.
pub const MAX_BODY: usize = 4096;
/// Bytes of a nonce.
pub const NONCE_LEN: usize = 32;
/// Bytes of a proof (HMAC-SHA256).
pub const PROOF_LEN: usize = 32;
const MAX_ADDR: usize = 512;

/// What a connection asks the agent for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// A rank opens a stream to another rank of its job (local endpoint).
    OpenRank {
        job: Name,
        src_rank: u32,
        dst_rank: u32,
    },
    /// A rank says where it accepts streams; holds while the connection stays open.
    Register {
        job: Name,
        rank: u32,
        accept: String,
    },
    /// Sent by the agent to a rank's accept endpoint before the stream's bytes.
    Incoming {
        job: Name,
        src_rank: u32,
        dst_rank: u32,
    },
    /// An agent hands a stream to the agent of another node (data port).
    Peer(PeerRequest),
}

/// An agent-to-agent request: who asks, its nonce, and what the stream is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerRequest {
    /// The node the dialing agent says it is; must be in the receiver's directory.
    pub src_node: Name,
    /// The dialer's fresh random nonce for the challenge-response.
    pub nonce: [u8; NONCE_LEN],
    pub want: PeerWant,
}

/// What a peer stream is for. Each names something that belongs to the receiving node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerWant {
    /// A rank stream to `dst_rank` of `job`, which must run on the receiving node.
    Rank {
        job: Name,
        src_rank: u32,
        dst_rank: u32,
    },
    /// A forwarded TCP connection to `target`, an address of the receiving node.
    Forward { target: String },
    /// Calibration: the receiver discards what it gets and reports the rate.
    Sink,
    /// An intercepted TCP connection (kernel redirect or preload library): a program on
    /// the dialing node at `src` connected to `dst`, an address of the receiving node. The
    /// receiver connects to `dst` from `src` (a transparent socket), so the program there
    /// sees the original peer; `src` must be the dialing node's own address.
    Intercepted {
        src: std::net::SocketAddr,
        dst: std::net::SocketAddr,
    },
    /// The kernel-paced links' exchange: the dialing agent sends its node's flows
    /// ([`crate::flows::FlowRow`]) on this stream whenever they change, and the receiver
    /// shares its links among every node's flows (`throttle-agent`'s `services::pacing`).
    /// The handshake proves the sender holds the cluster token: no one without it can
    /// move a node's shares.
    Flows,
}

impl Request {
    fn kind(&self) -> u8 {
        match self {
            Request::OpenRank { .. } => 1,
            Request::Register { .. } => 2,
            Request::Peer(p) => match p.want {
                PeerWant::Rank { .. } => 3,
                PeerWant::Forward { .. } => 4,
                PeerWant::Sink => 5,
                PeerWant::Intercepted { .. } => 7,
                PeerWant::Flows => 8,
            },
            Request::Incoming { .. } => 6,
        }
    }

    /// The bytes on the wire. `decode(encode(r)) == r` for every valid request, and the
    /// encoding is canonical, so both ends of a peer handshake authenticate the same bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        match self {
            Request::OpenRank {
                job,
                src_rank,
                dst_rank,
            }
            | Request::Incoming {
                job,
                src_rank,
                dst_rank,
            } => {
                put_str(&mut body, job.as_str());
                body.extend_from_slice(&src_rank.to_be_bytes());
                body.extend_from_slice(&dst_rank.to_be_bytes());
            }
            Request::Register { job, rank, accept } => {
                put_str(&mut body, job.as_str());
                body.extend_from_slice(&rank.to_be_bytes());
                put_str(&mut body, accept);
            }
            Request::Peer(p) => {
                put_str(&mut body, p.src_node.as_str());
                body.extend_from_slice(&p.nonce);
                match &p.want {
                    PeerWant::Rank {
                        job,
                        src_rank,
                        dst_rank,
                    } => {
                        put_str(&mut body, job.as_str());
                        body.extend_from_slice(&src_rank.to_be_bytes());
                        body.extend_from_slice(&dst_rank.to_be_bytes());
                    }
                    PeerWant::Forward { target } => put_str(&mut body, target),
                    PeerWant::Sink | PeerWant::Flows => {}
                    PeerWant::Intercepted { src, dst } => {
                        put_addr(&mut body, src);
                        put_addr(&mut body, dst);
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(HEADER_LEN + body.len());
        out.extend_from_slice(&REQUEST_MAGIC);
        out.push(VERSION);
        out.push(self.kind());
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Parse a request from its header and body (sans-IO).
    pub fn decode(header: [u8; HEADER_LEN], body: &[u8]) -> Result<Request, WireError> {
        let len = request_body_len(&header)?;
        if body.len() != len {
            return Err(WireError::new(
                Code::Malformed,
                format!(
                    "the header announces a body of {len} bytes, {} came",
                    body.len()
                ),
            ));
        }
        let mut r = Fields { buf: body };
        let req = match header[5] {
            1 | 6 => {
                let job = r.name("job")?;
                let src_rank = r.u32("src_rank")?;
                let dst_rank = r.u32("dst_rank")?;
                if header[5] == 1 {
                    Request::OpenRank {
                        job,
                        src_rank,
                        dst_rank,
                    }
                } else {
                    Request::Incoming {
                        job,
                        src_rank,
                        dst_rank,
                    }
                }
            }
            2 => Request::Register {
                job: r.name("job")?,
                rank: r.u32("rank")?,
                accept: r.str("accept address", MAX_ADDR)?,
            },
            k @ (3..=5 | 7 | 8) => {
                let src_node = r.name("node")?;
                let nonce = r.nonce()?;
                let want = match k {
                    3 => PeerWant::Rank {
                        job: r.name("job")?,
                        src_rank: r.u32("src_rank")?,
                        dst_rank: r.u32("dst_rank")?,
                    },
                    4 => PeerWant::Forward {
                        target: r.str("target", MAX_ADDR)?,
                    },
                    5 => PeerWant::Sink,
                    8 => PeerWant::Flows,
                    _ => PeerWant::Intercepted {
                        src: r.addr("source address")?,
                        dst: r.addr("destination address")?,
                    },
                };
                Request::Peer(PeerRequest {
                    src_node,
                    nonce,
                    want,
                })
            }
            k => {
                return Err(WireError::new(
                    Code::Malformed,
                    format!("unknown request kind {k}"),
                ))
            }
        };
        if !r.buf.is_empty() {
            return Err(WireError::new(
                Code::Malformed,
                format!("{} unexpected bytes after the request", r.buf.len()),
            ));
        }
        Ok(req)
    }
}

/// Check a request header and return the length of the body that follows (sans-IO).
pub fn request_body_len(header: &[u8; HEADER_LEN]) -> Result<usize, WireError> {
    if header[0..4] != REQUEST_MAGIC {
        return Err(WireError::new(
            Code::BadMagic,
            "this port speaks the throttle transport; the stream did not start with its magic `THRT`",
        ));
    }
    if header[4] != VERSION {
        return Err(WireError::new(
            Code::BadVersion,
            format!(
                "handshake version {} is not supported (this agent speaks {VERSION}); run the same throttle version on every node",
                header[4]
            ),
        ));
    }
    let len = u16::from_be_bytes([header[6], header[7]]) as usize;
    if len > MAX_BODY {
        return Err(WireError::new(
            Code::Malformed,
            format!("handshake body of {len} bytes exceeds the limit of {MAX_BODY}"),
        ));
    }
    Ok(len)
}

/// The receiver's answer to a peer request: its nonce and its proof of the token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    pub nonce: [u8; NONCE_LEN],
    pub proof: [u8; PROOF_LEN],
}

impl Challenge {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + NONCE_LEN + PROOF_LEN);
        out.extend_from_slice(&CHALLENGE_MAGIC);
        out.push(VERSION);
        out.push(0);
        out.extend_from_slice(&((NONCE_LEN + PROOF_LEN) as u16).to_be_bytes());
        out.extend_from_slice(&self.nonce);
        out.extend_from_slice(&self.proof);
        out
    }
}

/// What a dialer reads after sending a request: a challenge (peer requests) or a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Challenge(Challenge),
    Reply(Reply),
}

/// Check an answer header (reply or challenge) and return its body length (sans-IO).
pub fn answer_body_len(header: &[u8; HEADER_LEN]) -> Result<usize, WireError> {
    let magic = &header[0..4];
    if magic != REPLY_MAGIC && magic != CHALLENGE_MAGIC {
        return Err(WireError::new(
            Code::BadMagic,
            "the other side is not a throttle agent (reply magic missing)",
        ));
    }
    if header[4] != VERSION {
        return Err(WireError::new(
            Code::BadVersion,
            format!(
                "the agent answered with handshake version {} (this side speaks {VERSION}); run the same throttle version on every node",
                header[4]
            ),
        ));
    }
    let len = u16::from_be_bytes([header[6], header[7]]) as usize;
    if len > MAX_BODY || (magic == CHALLENGE_MAGIC && len != NONCE_LEN + PROOF_LEN) {
        return Err(WireError::new(
            Code::Malformed,
            format!("answer body of {len} bytes is not valid"),
        ));
    }
    Ok(len)
}

impl Answer {
    /// Parse an answer from its header and body (sans-IO).
    pub fn decode(header: [u8; HEADER_LEN], body: &[u8]) -> Result<Answer, WireError> {
        let len = answer_body_len(&header)?;
        if body.len() != len {
            return Err(WireError::new(Code::Malformed, "answer truncated"));
        }
        if header[0..4] == CHALLENGE_MAGIC {
            let mut nonce = [0u8; NONCE_LEN];
            let mut proof = [0u8; PROOF_LEN];
            nonce.copy_from_slice(&body[..NONCE_LEN]);
            proof.copy_from_slice(&body[NONCE_LEN..]);
            return Ok(Answer::Challenge(Challenge { nonce, proof }));
        }
        Ok(Answer::Reply(Reply {
            code: Code::from_u8(header[5]),
            message: String::from_utf8_lossy(body).into_owned(),
        }))
    }

    /// The reply, or an error if this was a challenge where a reply was due.
    pub fn into_reply(self) -> Result<Reply, WireError> {
        match self {
            Answer::Reply(r) => Ok(r),
            Answer::Challenge(_) => Err(WireError::new(
                Code::Malformed,
                "the agent sent a challenge where a reply was due",
            )),
        }
    }
}

/// Read one request (blocking), for synchronous accept endpoints (the `Incoming` header).
pub fn read_request_blocking<R: io::Read>(r: &mut R) -> Result<Request, WireError> {
    let mut header = [0u8; HEADER_LEN];
    r.read_exact(&mut header)
        .map_err(|e| WireError::new(Code::Malformed, format!("handshake header: {e}")))?;
    let mut body = vec![0u8; request_body_len(&header)?];
    r.read_exact(&mut body)
        .map_err(|e| WireError::new(Code::Malformed, format!("handshake body: {e}")))?;
    Request::decode(header, &body)
}

fn closed(e: io::Error) -> WireError {
    WireError::new(
        Code::PeerUnreachable,
        format!("the agent closed the connection before answering: {e}"),
    )
}

/// Read an answer (blocking): a challenge or a reply.
pub fn read_answer_blocking<R: io::Read>(r: &mut R) -> Result<Answer, WireError> {
    let mut header = [0u8; HEADER_LEN];
    r.read_exact(&mut header).map_err(closed)?;
    let mut body = vec![0u8; answer_body_len(&header)?];
    r.read_exact(&mut body)
        .map_err(|e| WireError::new(Code::Malformed, format!("answer truncated: {e}")))?;
    Answer::decode(header, &body)
}

/// Read a reply (blocking), for synchronous clients such as the workloads.
pub fn read_reply_blocking<R: io::Read>(r: &mut R) -> Result<Reply, WireError> {
    read_answer_blocking(r)?.into_reply()
}

struct Fields<'a> {
    buf: &'a [u8],
}

impl Fields<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], WireError> {
        if self.buf.len() < n {
            return Err(WireError::new(
                Code::Malformed,
                format!("handshake is truncated in field `{what}`"),
            ));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32, WireError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn nonce(&mut self) -> Result<[u8; NONCE_LEN], WireError> {
        let b = self.take(NONCE_LEN, "nonce")?;
        let mut n = [0u8; NONCE_LEN];
        n.copy_from_slice(b);
        Ok(n)
    }

    fn str(&mut self, what: &str, max: usize) -> Result<String, WireError> {
        let lb = self.take(2, what)?;
        let len = u16::from_be_bytes([lb[0], lb[1]]) as usize;
        if len > max {
            return Err(WireError::new(
                Code::Malformed,
                format!("field `{what}` is {len} bytes, more than the limit of {max}"),
            ));
        }
        let b = self.take(len, what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| WireError::new(Code::Malformed, format!("field `{what}` is not UTF-8")))
    }

    /// A socket address: family (4 or 6), the address's bytes, the port (u16 BE).
    fn addr(&mut self, what: &str) -> Result<std::net::SocketAddr, WireError> {
        let family = self.take(1, what)?[0];
        let ip: std::net::IpAddr = match family {
            4 => {
                let b: [u8; 4] = self.take(4, what)?.try_into().expect("4 bytes");
                b.into()
            }
            6 => {
                let b: [u8; 16] = self.take(16, what)?.try_into().expect("16 bytes");
                b.into()
            }
            f => {
                return Err(WireError::new(
                    Code::Malformed,
                    format!("field `{what}` has address family {f}, not 4 or 6"),
                ))
            }
        };
        let p = self.take(2, what)?;
        Ok(std::net::SocketAddr::new(
            ip,
            u16::from_be_bytes([p[0], p[1]]),
        ))
    }

    fn name(&mut self, what: &'static str) -> Result<Name, WireError> {
        let s = self.str(what, crate::name::MAX_NAME_LEN)?;
        Name::parse(what, &s).map_err(|e| WireError::new(Code::Malformed, e.to_string()))
    }
}

fn put_addr(out: &mut Vec<u8>, a: &std::net::SocketAddr) {
    match a.ip() {
        std::net::IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        std::net::IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&a.port().to_be_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    let n = b.len().min(u16::MAX as usize);
    out.extend_from_slice(&(n as u16).to_be_bytes());
    out.extend_from_slice(&b[..n]);
}

/// How often a client asks again when an agent answers `Busy`.
pub const BUSY_RETRIES: u32 = 30;

/// The header of an agent's 503 that refused a control connection at admission, before
/// reading anything of it: the request was not seen, and may be sent again as it was.
pub const BUSY_HEADER: &str = "x-throttle-busy";

/// Wait before retry `attempt` (1-based) after a `Busy` answer: 2 ms doubling to 100 ms,
/// with jitter so that many clients refused together do not return together. Thirty
/// retries span about 2.5 s.
pub fn busy_backoff(attempt: u32) -> std::time::Duration {
    let base = (2u64 << attempt.min(6)).min(100);
    let mut j = [0u8; 1];
    let _ = getrandom::getrandom(&mut j);
    std::time::Duration::from_millis(base / 2 + (base / 2) * j[0] as u64 / 255)
}

/// Outcome codes of a handshake. Stable: clients match on the numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Code {
    Ok = 0,
    BadMagic = 1,
    BadVersion = 2,
    Malformed = 3,
    Unauthorized = 4,
    UnknownJob = 5,
    UnknownRank = 6,
    RankNotRegistered = 7,
    PeerUnreachable = 8,
    TargetUnreachable = 9,
    UnknownNode = 10,
    Conflict = 11,
    Internal = 12,
    /// The request is authenticated but asks for something this node does not own.
    Forbidden = 13,
    /// Too many connections at once; try again later.
    Busy = 14,
    /// The other side dropped the connection during the handshake (it may have been
    /// full); worth asking again. Never sent on the wire.
    Refused = 15,
    /// Nothing listens at the target (a direct connection would get ECONNREFUSED).
    TargetRefused = 16,
    /// The target did not answer in time (a direct connection would get ETIMEDOUT).
    TargetTimedOut = 17,
}

impl Code {
    pub fn from_u8(v: u8) -> Code {
        match v {
            0 => Code::Ok,
            1 => Code::BadMagic,
            2 => Code::BadVersion,
            3 => Code::Malformed,
            4 => Code::Unauthorized,
            5 => Code::UnknownJob,
            6 => Code::UnknownRank,
            7 => Code::RankNotRegistered,
            8 => Code::PeerUnreachable,
            9 => Code::TargetUnreachable,
            10 => Code::UnknownNode,
            11 => Code::Conflict,
            13 => Code::Forbidden,
            14 => Code::Busy,
            15 => Code::Refused,
            16 => Code::TargetRefused,
            17 => Code::TargetTimedOut,
            _ => Code::Internal,
        }
    }
}

/// A handshake failure: a code for programs, a message for people.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({code:?})")]
pub struct WireError {
    pub code: Code,
    pub message: String,
}

impl WireError {
    pub fn new(code: Code, message: impl Into<String>) -> WireError {
        WireError {
            code,
            message: message.into(),
        }
    }
}

/// The answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub code: Code,
    pub message: String,
}

impl Reply {
    pub fn ok() -> Reply {
        Reply {
            code: Code::Ok,
            message: String::new(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let msg = self.message.as_bytes();
        let mut n = msg.len().min(MAX_BODY);
        while n < msg.len() && !self.message.is_char_boundary(n) {
            n -= 1;
        }
        let mut out = Vec::with_capacity(HEADER_LEN + n);
        out.extend_from_slice(&REPLY_MAGIC);
        out.push(VERSION);
        out.push(self.code as u8);
        out.extend_from_slice(&(n as u16).to_be_bytes());
        out.extend_from_slice(&msg[..n]);
        out
    }

    /// `Ok(())` for an ok reply, the error it carries otherwise.
    pub fn into_result(self) -> Result<(), WireError> {
        if self.code == Code::Ok {
            Ok(())
        } else {
            Err(WireError::new(self.code, self.message))
        }
    }
}

impl From<WireError> for Reply {
    fn from(e: WireError) -> Reply {
        Reply {
            code: e.code,
            message: e.message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::parse("name", s).unwrap()
    }

    pub(super) fn all_requests() -> Vec<Request> {
        vec![
            Request::OpenRank {
                job: name("j1"),
                src_rank: 0,
                dst_rank: 7,
            },
            Request::Register {
                job: name("j1"),
                rank: 3,
                accept: "unix:/tmp/x.sock".into(),
            },
            Request::Peer(PeerRequest {
                src_node: name("n0"),
                nonce: [7; NONCE_LEN],
                want: PeerWant::Rank {
                    job: name("j"),
                    src_rank: 1,
                    dst_rank: u32::MAX,
                },
            }),
            Request::Peer(PeerRequest {
                src_node: name("n1"),
                nonce: [0; NONCE_LEN],
                want: PeerWant::Forward {
                    target: "127.0.0.1:5201".into(),
                },
            }),
            Request::Peer(PeerRequest {
                src_node: name("n1"),
                nonce: [255; NONCE_LEN],
                want: PeerWant::Sink,
            }),
            Request::Incoming {
                job: name("j"),
                src_rank: 2,
                dst_rank: 3,
            },
            Request::Peer(PeerRequest {
                src_node: name("n2"),
                nonce: [9; NONCE_LEN],
                want: PeerWant::Intercepted {
                    src: "198.18.0.1:40000".parse().unwrap(),
                    dst: "[2001:db8::2]:5201".parse().unwrap(),
                },
            }),
            Request::Peer(PeerRequest {
                src_node: name("n3"),
                nonce: [7; NONCE_LEN],
                want: PeerWant::Flows,
            }),
        ]
    }

    fn split(bytes: &[u8]) -> ([u8; HEADER_LEN], &[u8]) {
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&bytes[..HEADER_LEN]);
        (h, &bytes[HEADER_LEN..])
    }

    #[test]
    fn every_request_round_trips() {
        for req in all_requests() {
            let bytes = req.encode();
            let (h, body) = split(&bytes);
            assert_eq!(Request::decode(h, body).unwrap(), req);
        }
    }

    #[test]
    fn frame_headers_round_trip_and_bound_the_lateness() {
        let h = frame_header(65536, std::time::Duration::from_micros(1234));
        assert_eq!(
            parse_frame_header(&h),
            (65536, std::time::Duration::from_micros(1234))
        );
        // The end marker.
        assert_eq!(
            parse_frame_header(&frame_header(0, Default::default())).0,
            0
        );
        // Lateness beyond the bound is sent and read as the bound.
        let h = frame_header(1, std::time::Duration::from_secs(100));
        assert_eq!(parse_frame_header(&h).1, MAX_FRAME_LATENESS);
        assert_eq!(parse_frame_header(&[0xff; 8]).1, MAX_FRAME_LATENESS);
    }

    #[test]
    fn bad_magic_and_version_get_their_codes() {
        let bytes = all_requests()[0].encode();
        let (mut h, body) = split(&bytes);
        h[0] = b'G';
        assert_eq!(Request::decode(h, body).unwrap_err().code, Code::BadMagic);
        let (mut h, body) = split(&bytes);
        h[4] = 1;
        let e = Request::decode(h, body).unwrap_err();
        assert_eq!(e.code, Code::BadVersion);
        assert!(e.message.contains("same throttle version"), "{e}");
    }

    #[test]
    fn truncated_and_trailing_bytes_are_malformed() {
        for req in all_requests() {
            let bytes = req.encode();
            let (h, body) = split(&bytes);
            for cut in 0..body.len() {
                let mut h2 = h;
                h2[6..8].copy_from_slice(&(cut as u16).to_be_bytes());
                let e = Request::decode(h2, &body[..cut]).unwrap_err();
                assert_eq!(e.code, Code::Malformed, "{req:?} cut at {cut}");
                // A header that promises more than came is malformed too.
                assert_eq!(
                    Request::decode(h, &body[..cut]).unwrap_err().code,
                    Code::Malformed
                );
            }
            let mut longer = body.to_vec();
            longer.push(0);
            let mut h2 = h;
            h2[6..8].copy_from_slice(&(longer.len() as u16).to_be_bytes());
            assert_eq!(
                Request::decode(h2, &longer).unwrap_err().code,
                Code::Malformed
            );
        }
    }

    #[test]
    fn unknown_kind_oversized_fields_and_bad_names_are_malformed() {
        let bytes = all_requests()[0].encode();
        let (mut h, body) = split(&bytes);
        h[5] = 99;
        assert_eq!(Request::decode(h, body).unwrap_err().code, Code::Malformed);
        // A job name that is not a Name: `..`, a slash, too long, empty.
        for bad in ["..", "a/b", "", &"x".repeat(65)] {
            let mut body = Vec::new();
            put_str(&mut body, bad);
            body.extend_from_slice(&[0; 8]);
            let mut h = *b"THRT\0\x01\0\0";
            h[4] = VERSION;
            h[6..8].copy_from_slice(&(body.len() as u16).to_be_bytes());
            let e = Request::decode(h, &body).unwrap_err();
            assert_eq!(e.code, Code::Malformed, "{bad}: {e}");
        }
    }

    #[test]
    fn oversized_body_is_refused_before_reading_it() {
        let mut bytes = all_requests()[0].encode();
        bytes[6] = 0xff;
        bytes[7] = 0xff;
        let mut r = &bytes[..];
        let e = read_request_blocking(&mut r).unwrap_err();
        assert!(e.message.contains("exceeds"), "{e}");
    }

    #[test]
    fn replies_and_challenges_round_trip() {
        let reply = Reply {
            code: Code::UnknownJob,
            message: "no job `x`".into(),
        };
        let bytes = reply.encode();
        let got = read_reply_blocking(&mut &bytes[..]).unwrap();
        assert_eq!(got, reply);
        let got = read_reply_blocking(&mut &bytes[..]).unwrap();
        assert_eq!(got.into_result().unwrap_err().code, Code::UnknownJob);
        let c = Challenge {
            nonce: [1; NONCE_LEN],
            proof: [2; PROOF_LEN],
        };
        let bytes = c.encode();
        assert_eq!(
            read_answer_blocking(&mut &bytes[..]).unwrap(),
            Answer::Challenge(c.clone())
        );
        assert_eq!(
            read_answer_blocking(&mut &bytes[..]).unwrap(),
            Answer::Challenge(c)
        );
        assert_eq!(
            read_reply_blocking(&mut &bytes[..]).unwrap_err().code,
            Code::Malformed
        );
    }

    #[test]
    fn long_reply_messages_are_cut_on_a_character_boundary() {
        let r = Reply {
            code: Code::Internal,
            message: "é".repeat(MAX_BODY),
        };
        let bytes = r.encode();
        let (h, body) = split(&bytes);
        let got = Answer::decode(h, body).unwrap().into_reply().unwrap();
        assert!(!got.message.contains('\u{fffd}'));
    }
}

/// Property tests: the parser never panics, and what it accepts round-trips exactly.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn header_from(bytes: &[u8]) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        for (i, b) in bytes.iter().take(HEADER_LEN).enumerate() {
            h[i] = *b;
        }
        h
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(4096)
        ))]

        /// Arbitrary bytes after a valid magic and version: decode returns, and anything it
        /// accepts encodes back to exactly the bytes it came from (the canonical form both
        /// ends of a peer handshake authenticate).
        #[test]
        fn decode_never_panics_and_accepted_requests_are_canonical(
            kind in 0u8..8,
            body in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut h = *b"THRT\0\0\0\0";
            h[4] = VERSION;
            h[5] = kind;
            h[6..8].copy_from_slice(&(body.len() as u16).to_be_bytes());
            if let Ok(req) = Request::decode(h, &body) {
                let again = req.encode();
                prop_assert_eq!(&again[..HEADER_LEN], &h[..]);
                prop_assert_eq!(&again[HEADER_LEN..], &body[..]);
            }
        }

        /// Structured mutations of valid requests: flip, cut or extend any byte.
        #[test]
        fn mutated_requests_never_panic(
            which in 0usize..7,
            pos in any::<prop::sample::Index>(),
            val in any::<u8>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = super::tests::all_requests()[which].encode();
            let p = pos.index(bytes.len());
            bytes[p] = val;
            let c = cut.index(bytes.len() + 1);
            bytes.truncate(c.max(HEADER_LEN));
            let h = header_from(&bytes);
            let _ = Request::decode(h, &bytes[HEADER_LEN..]);
            let _ = Answer::decode(h, &bytes[HEADER_LEN..]);
            let _ = read_request_blocking(&mut &bytes[..]);
            let _ = read_answer_blocking(&mut &bytes[..]);
        }

        /// Completely arbitrary input to every reader.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = read_request_blocking(&mut &bytes[..]);
            let _ = read_answer_blocking(&mut &bytes[..]);
            if bytes.len() >= HEADER_LEN {
                let h = header_from(&bytes);
                let _ = Request::decode(h, &bytes[HEADER_LEN..]);
                let _ = Answer::decode(h, &bytes[HEADER_LEN..]);
            }
        }
    }
}
