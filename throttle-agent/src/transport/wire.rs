//! The small binary handshake that opens every stream of the proxy transport.
//!
//! Every connection to an agent's local endpoint or data port starts with one
//! [`Request`] and is answered with one [`Reply`]; after an `Ok` reply the connection
//! carries the stream's bytes. Keeping the format in one module (with its own tests)
//! means ranks, agents and the workloads' communicator all speak exactly the same thing.
//!
//! ```text
//! request: "THRT" | version u8 | kind u8 | body_len u16 BE | body
//! reply:   "THRR" | version u8 | code u8 | msg_len u16 BE  | msg (UTF-8)
//! body fields: str = u16 BE length + UTF-8, u32 BE
//! ```
//! Lengths are bounded ([`MAX_BODY`], per-field limits) so a hostile peer cannot make the
//! agent allocate; a malformed request gets a reply with an error code, then the close.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub const REQUEST_MAGIC: [u8; 4] = *b"THRT";
pub const REPLY_MAGIC: [u8; 4] = *b"THRR";
pub const VERSION: u8 = 1;
/// Largest request body accepted.
pub const MAX_BODY: usize = 4096;
const MAX_JOB: usize = 128;
const MAX_ADDR: usize = 512;
const MAX_TOKEN: usize = 512;
const MAX_NODE: usize = 128;

/// What a connection asks the agent for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// A rank opens a stream to another rank of its job (local endpoint).
    OpenRank {
        job: String,
        src_rank: u32,
        dst_rank: u32,
    },
    /// A rank says where it accepts streams; holds while the connection stays open.
    Register {
        job: String,
        rank: u32,
        accept: String,
    },
    /// An agent carries a rank stream to the agent of the destination's node.
    PeerRank {
        token: String,
        src_node: String,
        job: String,
        src_rank: u32,
        dst_rank: u32,
    },
    /// An agent carries a forwarded TCP connection to `target` on the peer's node.
    PeerForward {
        token: String,
        src_node: String,
        target: String,
    },
    /// Calibration: the peer discards what it receives and reports the rate.
    PeerSink { token: String, src_node: String },
    /// Sent by the agent to a rank's accept endpoint before the stream's bytes.
    Incoming {
        job: String,
        src_rank: u32,
        dst_rank: u32,
    },
}

impl Request {
    fn kind(&self) -> u8 {
        match self {
            Request::OpenRank { .. } => 1,
            Request::Register { .. } => 2,
            Request::PeerRank { .. } => 3,
            Request::PeerForward { .. } => 4,
            Request::PeerSink { .. } => 5,
            Request::Incoming { .. } => 6,
        }
    }

    /// The bytes on the wire.
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
                put_str(&mut body, job);
                body.extend_from_slice(&src_rank.to_be_bytes());
                body.extend_from_slice(&dst_rank.to_be_bytes());
            }
            Request::Register { job, rank, accept } => {
                put_str(&mut body, job);
                body.extend_from_slice(&rank.to_be_bytes());
                put_str(&mut body, accept);
            }
            Request::PeerRank {
                token,
                src_node,
                job,
                src_rank,
                dst_rank,
            } => {
                put_str(&mut body, token);
                put_str(&mut body, src_node);
                put_str(&mut body, job);
                body.extend_from_slice(&src_rank.to_be_bytes());
                body.extend_from_slice(&dst_rank.to_be_bytes());
            }
            Request::PeerForward {
                token,
                src_node,
                target,
            } => {
                put_str(&mut body, token);
                put_str(&mut body, src_node);
                put_str(&mut body, target);
            }
            Request::PeerSink { token, src_node } => {
                put_str(&mut body, token);
                put_str(&mut body, src_node);
            }
        }
        let mut out = Vec::with_capacity(8 + body.len());
        out.extend_from_slice(&REQUEST_MAGIC);
        out.push(VERSION);
        out.push(self.kind());
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Parse a request from its 8-byte header and body.
    pub fn decode(header: [u8; 8], body: &[u8]) -> Result<Request, WireError> {
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
                    "handshake version {} is not supported (this agent speaks {VERSION})",
                    header[4]
                ),
            ));
        }
        let mut r = Fields { buf: body };
        let req = match header[5] {
            1 | 6 => {
                let job = r.str("job", MAX_JOB)?;
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
                job: r.str("job", MAX_JOB)?,
                rank: r.u32("rank")?,
                accept: r.str("accept address", MAX_ADDR)?,
            },
            3 => Request::PeerRank {
                token: r.str("token", MAX_TOKEN)?,
                src_node: r.str("node", MAX_NODE)?,
                job: r.str("job", MAX_JOB)?,
                src_rank: r.u32("src_rank")?,
                dst_rank: r.u32("dst_rank")?,
            },
            4 => Request::PeerForward {
                token: r.str("token", MAX_TOKEN)?,
                src_node: r.str("node", MAX_NODE)?,
                target: r.str("target", MAX_ADDR)?,
            },
            5 => Request::PeerSink {
                token: r.str("token", MAX_TOKEN)?,
                src_node: r.str("node", MAX_NODE)?,
            },
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
        if let Request::OpenRank { job, .. }
        | Request::Register { job, .. }
        | Request::PeerRank { job, .. }
        | Request::Incoming { job, .. } = &req
        {
            if job.is_empty() {
                return Err(WireError::new(Code::Malformed, "job name is empty"));
            }
        }
        Ok(req)
    }
}

/// Read one request, refusing oversized or malformed input.
pub async fn read_request<R: AsyncRead + Unpin>(r: &mut R) -> Result<Request, WireError> {
    let mut header = [0u8; 8];
    r.read_exact(&mut header).await.map_err(|e| {
        WireError::new(
            Code::Malformed,
            format!("connection ended inside the handshake header: {e}"),
        )
    })?;
    if header[0..4] != REQUEST_MAGIC {
        return Request::decode(header, &[]);
    }
    let len = u16::from_be_bytes([header[6], header[7]]) as usize;
    if len > MAX_BODY {
        return Err(WireError::new(
            Code::Malformed,
            format!("handshake body of {len} bytes exceeds the limit of {MAX_BODY}"),
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.map_err(|e| {
        WireError::new(
            Code::Malformed,
            format!("connection ended inside the handshake body: {e}"),
        )
    })?;
    Request::decode(header, &body)
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
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    let n = b.len().min(u16::MAX as usize);
    out.extend_from_slice(&(n as u16).to_be_bytes());
    out.extend_from_slice(&b[..n]);
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
        let n = msg.len().min(MAX_BODY);
        let mut out = Vec::with_capacity(8 + n);
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

pub async fn write_reply<W: AsyncWrite + Unpin>(w: &mut W, reply: &Reply) -> io::Result<()> {
    w.write_all(&reply.encode()).await
}

/// Read a reply (async).
pub async fn read_reply<R: AsyncRead + Unpin>(r: &mut R) -> Result<Reply, WireError> {
    let mut header = [0u8; 8];
    r.read_exact(&mut header).await.map_err(|e| {
        WireError::new(
            Code::PeerUnreachable,
            format!("the agent closed the connection before answering: {e}"),
        )
    })?;
    let len = parse_reply_header(&header)?;
    let mut msg = vec![0u8; len];
    r.read_exact(&mut msg)
        .await
        .map_err(|e| WireError::new(Code::Malformed, format!("reply truncated: {e}")))?;
    Ok(Reply {
        code: Code::from_u8(header[5]),
        message: String::from_utf8_lossy(&msg).into_owned(),
    })
}

/// Read a reply (blocking), for synchronous clients such as the workloads.
pub fn read_reply_blocking<R: io::Read>(r: &mut R) -> Result<Reply, WireError> {
    let mut header = [0u8; 8];
    r.read_exact(&mut header).map_err(|e| {
        WireError::new(
            Code::PeerUnreachable,
            format!("the agent closed the connection before answering: {e}"),
        )
    })?;
    let len = parse_reply_header(&header)?;
    let mut msg = vec![0u8; len];
    r.read_exact(&mut msg)
        .map_err(|e| WireError::new(Code::Malformed, format!("reply truncated: {e}")))?;
    Ok(Reply {
        code: Code::from_u8(header[5]),
        message: String::from_utf8_lossy(&msg).into_owned(),
    })
}

/// Read a request (blocking), for synchronous accept endpoints (the `Incoming` header).
pub fn read_request_blocking<R: io::Read>(r: &mut R) -> Result<Request, WireError> {
    let mut header = [0u8; 8];
    r.read_exact(&mut header)
        .map_err(|e| WireError::new(Code::Malformed, format!("handshake header: {e}")))?;
    let len = u16::from_be_bytes([header[6], header[7]]) as usize;
    if header[0..4] != REQUEST_MAGIC || len > MAX_BODY {
        return Request::decode(header, &[]).and(Err(WireError::new(
            Code::Malformed,
            "handshake body too large",
        )));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)
        .map_err(|e| WireError::new(Code::Malformed, format!("handshake body: {e}")))?;
    Request::decode(header, &body)
}

fn parse_reply_header(header: &[u8; 8]) -> Result<usize, WireError> {
    if header[0..4] != REPLY_MAGIC {
        return Err(WireError::new(
            Code::BadMagic,
            "the other side is not a throttle agent (reply magic missing)",
        ));
    }
    let len = u16::from_be_bytes([header[6], header[7]]) as usize;
    if len > MAX_BODY {
        return Err(WireError::new(Code::Malformed, "reply message too long"));
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_requests() -> Vec<Request> {
        vec![
            Request::OpenRank {
                job: "j1".into(),
                src_rank: 0,
                dst_rank: 7,
            },
            Request::Register {
                job: "j1".into(),
                rank: 3,
                accept: "unix:/tmp/x.sock".into(),
            },
            Request::PeerRank {
                token: "secret".into(),
                src_node: "n0".into(),
                job: "j".into(),
                src_rank: 1,
                dst_rank: u32::MAX,
            },
            Request::PeerForward {
                token: "t".into(),
                src_node: "n1".into(),
                target: "127.0.0.1:5201".into(),
            },
            Request::PeerSink {
                token: "t".into(),
                src_node: "n1".into(),
            },
            Request::Incoming {
                job: "j".into(),
                src_rank: 2,
                dst_rank: 3,
            },
        ]
    }

    fn split(bytes: &[u8]) -> ([u8; 8], &[u8]) {
        let mut h = [0u8; 8];
        h.copy_from_slice(&bytes[..8]);
        (h, &bytes[8..])
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
    fn bad_magic_and_version_get_their_codes() {
        let bytes = all_requests()[0].encode();
        let (mut h, body) = split(&bytes);
        h[0] = b'G';
        assert_eq!(Request::decode(h, body).unwrap_err().code, Code::BadMagic);
        let (mut h, body) = split(&bytes);
        h[4] = 9;
        assert_eq!(Request::decode(h, body).unwrap_err().code, Code::BadVersion);
    }

    #[test]
    fn truncated_and_trailing_bytes_are_malformed() {
        for req in all_requests() {
            let bytes = req.encode();
            let (h, body) = split(&bytes);
            for cut in 0..body.len() {
                let e = Request::decode(h, &body[..cut]).unwrap_err();
                assert_eq!(e.code, Code::Malformed, "{req:?} cut at {cut}");
            }
            let mut longer = body.to_vec();
            longer.push(0);
            assert_eq!(
                Request::decode(h, &longer).unwrap_err().code,
                Code::Malformed
            );
        }
    }

    #[test]
    fn unknown_kind_and_oversized_fields_are_malformed() {
        let bytes = all_requests()[0].encode();
        let (mut h, body) = split(&bytes);
        h[5] = 99;
        assert_eq!(Request::decode(h, body).unwrap_err().code, Code::Malformed);
        let long = Request::OpenRank {
            job: "x".repeat(MAX_JOB + 1),
            src_rank: 0,
            dst_rank: 0,
        }
        .encode();
        let (h, body) = split(&long);
        let e = Request::decode(h, body).unwrap_err();
        assert!(e.message.contains("limit"), "{e}");
    }

    #[test]
    fn empty_job_is_refused() {
        let bytes = Request::OpenRank {
            job: String::new(),
            src_rank: 0,
            dst_rank: 1,
        }
        .encode();
        let (h, body) = split(&bytes);
        assert_eq!(Request::decode(h, body).unwrap_err().code, Code::Malformed);
    }

    #[tokio::test]
    async fn oversized_body_is_refused_before_reading_it() {
        let mut bytes = all_requests()[0].encode();
        bytes[6] = 0xff;
        bytes[7] = 0xff;
        let mut r = &bytes[..];
        let e = read_request(&mut r).await.unwrap_err();
        assert!(e.message.contains("exceeds"), "{e}");
    }

    #[tokio::test]
    async fn reply_round_trips() {
        let reply = Reply {
            code: Code::UnknownJob,
            message: "no job `x`".into(),
        };
        let bytes = reply.encode();
        let got = read_reply(&mut &bytes[..]).await.unwrap();
        assert_eq!(got, reply);
        let got = read_reply_blocking(&mut &bytes[..]).unwrap();
        assert_eq!(got.into_result().unwrap_err().code, Code::UnknownJob);
    }
}
