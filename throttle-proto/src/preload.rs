//! The preload library's protocol with the agent on its own node (sans-IO).
//!
//! The preload library (`throttle-preload`, loaded into unmodified programs with
//! `LD_PRELOAD`) talks to the local agent's preload port on loopback. Each conversation
//! is one TCP connection that starts with a fixed-size [`Request`]:
//!
//! * [`Request::Connect`]: the connection itself is the program's socket; the agent
//!   carries it to `dst` on another node and answers with a [`ConnectReply`] (an errno,
//!   0 when the far side connected). After those 4 bytes the stream is the program's.
//! * [`Request::Nodes`]: which destinations to send through the agent: a [`NodeList`].
//! * [`Request::Peer`]: a connection the agent delivered to a program here came from
//!   where? A [`PeerReply`] with the original source the sending agents carried.
//!
//! In the kernel-paced mode (the node list says so) the library connects the program's
//! sockets to their peers directly and registers each with the agent on a Unix socket of
//! its own ([`pace_socket_name`]): a [`PaceRequest`] names the descriptor and the peer,
//! the agent takes the socket from the process (`pidfd_getfd`), sets its pacing rate,
//! closes its copy and answers with a [`PaceReply`]; no byte of the program passes the
//! agent.
//!
//! Everything is fixed-size or length-prefixed, big-endian, with no allocation on the
//! reading side beyond the node list: the library parses it inside `connect()` and
//! `accept()` of arbitrary programs.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// First bytes of every request.
pub const MAGIC: [u8; 4] = *b"THPL";
/// Protocol version; an agent refuses any other.
pub const VERSION: u8 = 1;
/// The preload port agents listen on (on 127.0.0.1 and ::1) unless told otherwise.
pub const DEFAULT_PORT: u16 = 7602;
/// Bytes of an encoded socket address: family, 16 address bytes, port.
pub const ADDR_LEN: usize = 19;
/// Bytes of a request.
pub const REQUEST_LEN: usize = 4 + 1 + 1 + ADDR_LEN;
/// Bytes of a [`ConnectReply`].
pub const CONNECT_REPLY_LEN: usize = 4;
/// Bytes of a [`PeerReply`].
pub const PEER_REPLY_LEN: usize = 4 + ADDR_LEN;
/// Most entries a node list may have (a reader refuses more).
pub const MAX_ENTRIES: usize = 16 * 1024;

/// What the library asks the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Carry this connection to `dst` (another node's program).
    Connect { dst: SocketAddr },
    /// Send the list of destinations to intercept.
    Nodes,
    /// Where did the delivered connection whose agent-side address is `via` come from?
    Peer { via: SocketAddr },
}

/// Why bytes are not a valid message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PreloadError {
    #[error("not a preload request (bad magic)")]
    BadMagic,
    #[error("preload protocol version {0} is not supported (this side speaks {VERSION})")]
    BadVersion(u8),
    #[error("unknown preload request kind {0}")]
    BadKind(u8),
    #[error("bad address family {0}")]
    BadFamily(u8),
    #[error("node list of {0} entries is longer than {MAX_ENTRIES}")]
    TooLong(usize),
    #[error("message cut short")]
    Short,
}

/// Write `addr` into `out[..ADDR_LEN]`.
pub fn encode_addr(addr: SocketAddr, out: &mut [u8]) {
    out[..ADDR_LEN].fill(0);
    match addr.ip() {
        IpAddr::V4(ip) => {
            out[0] = 4;
            out[1..5].copy_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out[0] = 6;
            out[1..17].copy_from_slice(&ip.octets());
        }
    }
    out[17..19].copy_from_slice(&addr.port().to_be_bytes());
}

/// Read an address written by [`encode_addr`].
pub fn decode_addr(b: &[u8]) -> Result<SocketAddr, PreloadError> {
    if b.len() < ADDR_LEN {
        return Err(PreloadError::Short);
    }
    let port = u16::from_be_bytes([b[17], b[18]]);
    let ip = match b[0] {
        4 => IpAddr::V4(Ipv4Addr::new(b[1], b[2], b[3], b[4])),
        6 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(&b[1..17]);
            IpAddr::V6(Ipv6Addr::from(o))
        }
        f => return Err(PreloadError::BadFamily(f)),
    };
    Ok(SocketAddr::new(ip, port))
}

impl Request {
    fn kind(&self) -> u8 {
        match self {
            Request::Connect { .. } => 1,
            Request::Nodes => 2,
            Request::Peer { .. } => 3,
        }
    }

    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[5] = self.kind();
        let addr = match self {
            Request::Connect { dst } => Some(*dst),
            Request::Peer { via } => Some(*via),
            Request::Nodes => None,
        };
        if let Some(a) = addr {
            encode_addr(a, &mut b[6..]);
        }
        b
    }

    pub fn decode(b: &[u8; REQUEST_LEN]) -> Result<Request, PreloadError> {
        if b[..4] != MAGIC {
            return Err(PreloadError::BadMagic);
        }
        if b[4] != VERSION {
            return Err(PreloadError::BadVersion(b[4]));
        }
        match b[5] {
            1 => Ok(Request::Connect {
                dst: decode_addr(&b[6..])?,
            }),
            2 => Ok(Request::Nodes),
            3 => Ok(Request::Peer {
                via: decode_addr(&b[6..])?,
            }),
            k => Err(PreloadError::BadKind(k)),
        }
    }
}

/// The agent's answer to [`Request::Connect`]: the errno the program's `connect()` gets
/// (0: connected; ECONNREFUSED when nothing listens there, as a direct connection would).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectReply {
    pub errno: i32,
}

impl ConnectReply {
    pub fn encode(&self) -> [u8; CONNECT_REPLY_LEN] {
        self.errno.to_be_bytes()
    }
    pub fn decode(b: &[u8; CONNECT_REPLY_LEN]) -> ConnectReply {
        ConnectReply {
            errno: i32::from_be_bytes(*b),
        }
    }
}

/// The agent's answer to [`Request::Peer`]: the original source, or `None` when the
/// address is not one of the agent's deliveries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerReply {
    pub src: Option<SocketAddr>,
}

impl PeerReply {
    pub fn encode(&self) -> [u8; PEER_REPLY_LEN] {
        let mut b = [0u8; PEER_REPLY_LEN];
        match self.src {
            Some(a) => encode_addr(a, &mut b[4..]),
            None => b[..4].copy_from_slice(&1i32.to_be_bytes()),
        }
        b
    }
    pub fn decode(b: &[u8; PEER_REPLY_LEN]) -> Result<PeerReply, PreloadError> {
        if i32::from_be_bytes([b[0], b[1], b[2], b[3]]) != 0 {
            return Ok(PeerReply { src: None });
        }
        Ok(PeerReply {
            src: Some(decode_addr(&b[4..])?),
        })
    }
}

/// What the library sends through the agent, and how it recognises deliveries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeList {
    /// The other nodes' addresses: TCP connections to them (at ports from
    /// [`crate::preload::FIRST_PORT`] up) go through the agent.
    pub nodes: Vec<IpAddr>,
    /// Exceptions: the agents' own ports on those addresses.
    pub exempt: Vec<SocketAddr>,
    /// This node's address: the agent delivers connections from it (a connection accepted
    /// from it may be a delivery whose original source the agent knows).
    pub own: Option<IpAddr>,
    /// The nodes share this machine's one network stack, each at its own loopback
    /// address (a loopback cluster): the library gives a program of this node that
    /// node's view (its wildcard binds, its interfaces, its localhost).
    pub shared_stack: bool,
    /// The agent paces the program's own sockets in the kernel: connections to the
    /// nodes go to them directly, each registered first on the pacing socket.
    pub kernel_pacing: bool,
}

/// Lowest destination port that is intercepted: system services are left alone, as with
/// the kernel redirect.
pub const FIRST_PORT: u16 = 1024;

impl NodeList {
    /// Whether a TCP connection to `dst` goes through the agent.
    pub fn intercepts(&self, dst: SocketAddr) -> bool {
        let ip = dst.ip().to_canonical();
        dst.port() >= FIRST_PORT
            && self.nodes.contains(&ip)
            && !self
                .exempt
                .iter()
                .any(|e| e.ip() == ip && e.port() == dst.port())
    }

    /// Length-prefixed encoding: a u32 entry count, then per entry a kind byte (1 node,
    /// 2 exempt, 3 own, 4 shared stack, 5 kernel pacing: the last two's addresses unused)
    /// and an address.
    pub fn encode(&self) -> Vec<u8> {
        let entries: Vec<(u8, SocketAddr)> = self
            .nodes
            .iter()
            .map(|ip| (1, SocketAddr::new(*ip, 0)))
            .chain(self.exempt.iter().map(|a| (2, *a)))
            .chain(self.own.iter().map(|ip| (3, SocketAddr::new(*ip, 0))))
            .chain(
                self.shared_stack
                    .then(|| (4, SocketAddr::from(([0, 0, 0, 0], 0)))),
            )
            .chain(
                self.kernel_pacing
                    .then(|| (5, SocketAddr::from(([0, 0, 0, 0], 0)))),
            )
            .collect();
        let mut out = Vec::with_capacity(4 + entries.len() * (1 + ADDR_LEN));
        out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        for (kind, addr) in entries {
            out.push(kind);
            let at = out.len();
            out.resize(at + ADDR_LEN, 0);
            encode_addr(addr, &mut out[at..]);
        }
        out
    }

    /// The number of entries from the first 4 bytes (checked against [`MAX_ENTRIES`]), to
    /// know how many more bytes to read.
    pub fn entries(head: &[u8; 4]) -> Result<usize, PreloadError> {
        let n = u32::from_be_bytes(*head) as usize;
        if n > MAX_ENTRIES {
            return Err(PreloadError::TooLong(n));
        }
        Ok(n)
    }

    /// Decode the entries (the bytes after the count).
    pub fn decode(n: usize, body: &[u8]) -> Result<NodeList, PreloadError> {
        if body.len() < n * (1 + ADDR_LEN) {
            return Err(PreloadError::Short);
        }
        let mut list = NodeList::default();
        for e in body.chunks_exact(1 + ADDR_LEN).take(n) {
            let addr = decode_addr(&e[1..])?;
            match e[0] {
                1 => list.nodes.push(addr.ip()),
                2 => list.exempt.push(addr),
                3 => list.own = Some(addr.ip()),
                4 => list.shared_stack = true,
                5 => list.kernel_pacing = true,
                k => return Err(PreloadError::BadKind(k)),
            }
        }
        Ok(list)
    }
}

/// The abstract Unix socket name where the agent whose preload port is `preload` takes
/// registrations of paced sockets (one per agent: a loopback cluster's agents share the
/// machine's abstract namespace, each at its own preload address). Anyone may bind an
/// abstract name, so each side checks the other's user (`SO_PEERCRED`).
pub fn pace_socket_name(preload: SocketAddr) -> String {
    format!("throttle-pace/{preload}")
}

/// Which end of a connection the program's socket is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaceSide {
    /// The program connects to `peer` (the library registers before the real connect).
    Connect,
    /// The program accepted a connection from `peer`.
    Accept,
}

/// Bytes of a [`PaceRequest`].
pub const PACE_REQUEST_LEN: usize = 4 + 1 + 1 + 4 + ADDR_LEN;
/// First bytes of a [`PaceRequest`].
pub const PACE_MAGIC: [u8; 4] = *b"THPC";

/// Pace the sending side of the socket at descriptor `fd` of the asking process, whose
/// peer is (or is about to be) `peer`, another node's program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaceRequest {
    pub side: PaceSide,
    pub fd: i32,
    pub peer: SocketAddr,
}

impl PaceRequest {
    pub fn encode(&self) -> [u8; PACE_REQUEST_LEN] {
        let mut b = [0u8; PACE_REQUEST_LEN];
        b[..4].copy_from_slice(&PACE_MAGIC);
        b[4] = VERSION;
        b[5] = match self.side {
            PaceSide::Connect => 1,
            PaceSide::Accept => 2,
        };
        b[6..10].copy_from_slice(&self.fd.to_be_bytes());
        encode_addr(self.peer, &mut b[10..]);
        b
    }

    pub fn decode(b: &[u8; PACE_REQUEST_LEN]) -> Result<PaceRequest, PreloadError> {
        if b[..4] != PACE_MAGIC {
            return Err(PreloadError::BadMagic);
        }
        if b[4] != VERSION {
            return Err(PreloadError::BadVersion(b[4]));
        }
        let side = match b[5] {
            1 => PaceSide::Connect,
            2 => PaceSide::Accept,
            k => return Err(PreloadError::BadKind(k)),
        };
        Ok(PaceRequest {
            side,
            fd: i32::from_be_bytes([b[6], b[7], b[8], b[9]]),
            peer: decode_addr(&b[10..])?,
        })
    }
}

/// The agent's answer to a [`PaceRequest`]: 0 (paced), or why not as an errno (the
/// library then carries the connection through the agent, or leaves it unpaced).
pub type PaceReply = ConnectReply;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_bad_ones_are_named() {
        for r in [
            Request::Connect {
                dst: "198.18.0.2:5000".parse().unwrap(),
            },
            Request::Connect {
                dst: "[2001:2::1]:65535".parse().unwrap(),
            },
            Request::Nodes,
            Request::Peer {
                via: "198.18.0.1:40000".parse().unwrap(),
            },
        ] {
            assert_eq!(Request::decode(&r.encode()), Ok(r));
        }
        let mut b = Request::Nodes.encode();
        b[0] = b'X';
        assert_eq!(Request::decode(&b), Err(PreloadError::BadMagic));
        let mut b = Request::Nodes.encode();
        b[4] = 9;
        assert_eq!(Request::decode(&b), Err(PreloadError::BadVersion(9)));
        let mut b = Request::Nodes.encode();
        b[5] = 0;
        assert_eq!(Request::decode(&b), Err(PreloadError::BadKind(0)));
        let mut b = Request::Connect {
            dst: "198.18.0.2:5000".parse().unwrap(),
        }
        .encode();
        b[6] = 5;
        assert_eq!(Request::decode(&b), Err(PreloadError::BadFamily(5)));
    }

    #[test]
    fn node_lists_round_trip_and_decide_what_is_intercepted() {
        let list = NodeList {
            nodes: vec!["198.18.0.2".parse().unwrap(), "2001:2::2".parse().unwrap()],
            exempt: vec!["198.18.0.2:7601".parse().unwrap()],
            own: Some("198.18.0.1".parse().unwrap()),
            shared_stack: false,
            kernel_pacing: false,
        };
        let b = list.encode();
        let n = NodeList::entries(b[..4].try_into().unwrap()).unwrap();
        assert_eq!(NodeList::decode(n, &b[4..]), Ok(list.clone()));
        let shared = NodeList {
            shared_stack: true,
            kernel_pacing: true,
            ..list.clone()
        };
        let b = shared.encode();
        let n = NodeList::entries(b[..4].try_into().unwrap()).unwrap();
        assert_eq!(NodeList::decode(n, &b[4..]), Ok(shared));
        assert!(list.intercepts("198.18.0.2:5000".parse().unwrap()));
        // A v4-mapped destination (a dual-stack socket) is the same node.
        assert!(list.intercepts("[::ffff:198.18.0.2]:5000".parse().unwrap()));
        assert!(list.intercepts("[2001:2::2]:5000".parse().unwrap()));
        assert!(
            !list.intercepts("198.18.0.2:7601".parse().unwrap()),
            "an agent's port"
        );
        assert!(
            !list.intercepts("198.18.0.2:22".parse().unwrap()),
            "a system port"
        );
        assert!(
            !list.intercepts("198.18.0.1:5000".parse().unwrap()),
            "own node"
        );
        assert!(
            !list.intercepts("198.18.0.3:5000".parse().unwrap()),
            "not a node"
        );
        assert_eq!(
            NodeList::entries(&((MAX_ENTRIES as u32 + 1).to_be_bytes())),
            Err(PreloadError::TooLong(MAX_ENTRIES + 1))
        );
        assert_eq!(NodeList::decode(2, &b[4..10]), Err(PreloadError::Short));
    }

    #[test]
    fn pace_requests_round_trip_and_bad_ones_are_named() {
        for r in [
            PaceRequest {
                side: PaceSide::Connect,
                fd: 7,
                peer: "127.0.1.2:5000".parse().unwrap(),
            },
            PaceRequest {
                side: PaceSide::Accept,
                fd: i32::MAX,
                peer: "[2001:2::1]:40000".parse().unwrap(),
            },
        ] {
            assert_eq!(PaceRequest::decode(&r.encode()), Ok(r));
        }
        let good = PaceRequest {
            side: PaceSide::Connect,
            fd: 3,
            peer: "127.0.1.2:5000".parse().unwrap(),
        }
        .encode();
        let mut b = good;
        b[5] = 3;
        assert_eq!(PaceRequest::decode(&b), Err(PreloadError::BadKind(3)));
        let mut b = good;
        b[0] = b'X';
        assert_eq!(PaceRequest::decode(&b), Err(PreloadError::BadMagic));
        assert_eq!(
            pace_socket_name("127.0.1.1:7602".parse().unwrap()),
            "throttle-pace/127.0.1.1:7602"
        );
    }

    #[test]
    fn replies_round_trip() {
        let r = ConnectReply { errno: 111 };
        assert_eq!(ConnectReply::decode(&r.encode()), r);
        for p in [
            PeerReply { src: None },
            PeerReply {
                src: Some("198.18.0.3:41000".parse().unwrap()),
            },
        ] {
            assert_eq!(PeerReply::decode(&p.encode()), Ok(p));
        }
    }
}
