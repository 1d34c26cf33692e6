//! Direct links: a rank's stream to another node's rank on a TCP socket of its own, whose
//! rate the node's agent sets and the kernel keeps (`--links kernel` behind the egress
//! queue; decision 0050). No byte of the job then crosses an agent.
//!
//! The agent says so by launching the rank with `THROTTLE_PACE_SOCKET` (where it takes
//! registrations of paced sockets) and `THROTTLE_NODE_ADDR` (the node's address). The
//! two ranks meet through the agents first, so only a rank the job's map places on the
//! calling node can open the stream:
//!
//! 1. the sender opens the stream through the agents as always and sends [`HELLO`];
//! 2. the receiver answers on it with a fresh cookie and the address of its TCP listener
//!    (an empty answer: it takes no direct streams, and the tunnel carries the rest);
//! 3. the sender connects there, registers the socket with its agent ([`pace`]), sends
//!    the cookie and its rank, then [`MOVED`] on the tunnel, and from then on writes
//!    its messages to the socket; a socket its agent could not pace is closed before a
//!    byte of the job crossed it, and the tunnel carries the rest;
//! 4. the receiver takes a connection only with the cookie it handed that rank (compared
//!    in constant time, once), registers it with its own agent (for the counts of what
//!    entered the node), and reads it as it reads a tunnel.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use throttle_proto::preload::PaceSide;

use super::frame;
use super::CommError;

/// The tag of the sender's first message on a stream that may move (never a workload's).
pub const HELLO: u32 = u32::MAX;
/// The tag of the sender's last message on a tunnel it left for a direct socket.
pub const MOVED: u32 = u32::MAX - 1;
/// Tags the communicator keeps for itself.
pub fn reserved(tag: u32) -> bool {
    tag >= MOVED
}

/// Bytes of a cookie.
const COOKIE: usize = 32;
/// How long a connection to the listener may take to present its cookie.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// Connections that have not presented a cookie yet, at most: a stranger's flood of
/// connections costs it threads, not this rank's.
const MAX_PENDING: usize = 64;

/// This rank's end of direct links: its listener's address, the agent's pacing socket,
/// and the cookies handed out and not yet presented.
pub struct Direct {
    pace_socket: String,
    listening: SocketAddr,
    cookies: Mutex<HashMap<usize, [u8; COOKIE]>>,
    pending: AtomicUsize,
}

impl Direct {
    /// From the environment the agent launched this rank with: `None` where it asks for
    /// no direct links.
    pub fn from_env() -> Result<Option<(Arc<Direct>, TcpListener)>, CommError> {
        let (Ok(pace_socket), Ok(addr)) = (
            std::env::var("THROTTLE_PACE_SOCKET"),
            std::env::var("THROTTLE_NODE_ADDR"),
        ) else {
            return Ok(None);
        };
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| CommError::Setup(format!("THROTTLE_NODE_ADDR `{addr}` is no address")))?;
        Direct::listen(pace_socket, ip).map(Some)
    }

    /// Listen at `ip` (any port), registering sockets at the pacing socket `pace_socket`.
    pub fn listen(
        pace_socket: String,
        ip: IpAddr,
    ) -> Result<(Arc<Direct>, TcpListener), CommError> {
        let listener = TcpListener::bind((ip, 0))
            .map_err(|e| CommError::Setup(format!("cannot listen on {ip}: {e}")))?;
        let listening = listener
            .local_addr()
            .map_err(|e| CommError::Setup(e.to_string()))?;
        Ok((
            Arc::new(Direct {
                pace_socket,
                listening,
                cookies: Mutex::new(HashMap::new()),
                pending: AtomicUsize::new(0),
            }),
            listener,
        ))
    }

    /// The receiver's answer to `src`'s [`HELLO`]: a fresh cookie for it, and where to
    /// connect.
    pub fn invite(&self, src: usize) -> std::io::Result<Vec<u8>> {
        let cookie: [u8; COOKIE] = throttle_proto::auth::nonce()?[..COOKIE]
            .try_into()
            .map_err(|_| std::io::Error::other("short nonce"))?;
        self.cookies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(src, cookie);
        let mut answer = cookie.to_vec();
        answer.extend_from_slice(self.listening.to_string().as_bytes());
        Ok(answer)
    }

    /// Take one connection to the listener: the rank it comes from, once it presented
    /// the cookie that rank was handed (then forgotten), and the socket registered with
    /// this node's agent. `None`: not a rank of this job (closed).
    pub fn admit(&self, mut conn: TcpStream, size: usize) -> Option<(usize, TcpStream)> {
        struct Pending<'a>(&'a AtomicUsize);
        impl Drop for Pending<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        if self.pending.fetch_add(1, Ordering::Relaxed) >= MAX_PENDING {
            self.pending.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let _pending = Pending(&self.pending);
        conn.set_read_timeout(Some(HANDSHAKE)).ok()?;
        let mut hello = [0u8; COOKIE + 4];
        conn.read_exact(&mut hello).ok()?;
        let src = u32::from_le_bytes([
            hello[COOKIE],
            hello[COOKIE + 1],
            hello[COOKIE + 2],
            hello[COOKIE + 3],
        ]) as usize;
        if src >= size {
            return None;
        }
        {
            let mut cookies = self.cookies.lock().unwrap_or_else(|e| e.into_inner());
            let expected = cookies.get(&src)?;
            let differs = expected
                .iter()
                .zip(&hello[..COOKIE])
                .fold(0u8, |d, (a, b)| d | (a ^ b));
            if differs != 0 {
                return None;
            }
            cookies.remove(&src);
        }
        conn.set_read_timeout(None).ok()?;
        let peer = conn.peer_addr().ok()?;
        // It carries nothing back but acknowledgements: where its agent cannot take it,
        // only the receiving node's counts miss it, and the sender's agent paces it.
        if let Err(e) = pace(&self.pace_socket, &conn, peer, PaceSide::Accept) {
            eprintln!(
                "throttle: the agent did not register the direct stream from rank {src} ({e}); its bytes are missing from this node's counts"
            );
        }
        Some((src, conn))
    }

    /// The sender's side, on `tunnel` (a stream through the agents to `dst`, nothing sent
    /// on it yet): ask to move, and connect where the receiver says. `Ok(None)`: stay on
    /// the tunnel (the receiver takes no direct streams, or this node's agent could not
    /// pace the socket).
    pub fn connect(
        &self,
        tunnel: &mut std::os::unix::net::UnixStream,
        rank: usize,
        dst: usize,
        timeout: Duration,
    ) -> Result<Option<TcpStream>, CommError> {
        let failed = |why: String| CommError::Connect { rank: dst, why };
        frame::write_message(tunnel, HELLO, &[])
            .and_then(|_| tunnel.flush())
            .map_err(|e| failed(e.to_string()))?;
        tunnel
            .set_read_timeout(Some(timeout))
            .map_err(|e| failed(e.to_string()))?;
        let answer = match frame::read_message(tunnel) {
            Ok(Some((HELLO, answer))) => answer,
            Ok(Some((tag, _))) => return Err(failed(format!("answered tag {tag} to a hello"))),
            Ok(None) => return Err(failed("the stream ended before its answer".into())),
            Err(e) => return Err(failed(format!("no answer to its hello: {e}"))),
        };
        tunnel
            .set_read_timeout(None)
            .map_err(|e| failed(e.to_string()))?;
        if answer.is_empty() {
            return Ok(None);
        }
        if answer.len() <= COOKIE {
            return Err(failed("a short answer to its hello".into()));
        }
        let at: SocketAddr = std::str::from_utf8(&answer[COOKIE..])
            .ok()
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| failed("its answer names no address".into()))?;
        if at.ip() == self.listening.ip() {
            // A rank of this node: the agent joins them unshaped, as shared memory.
            return Ok(None);
        }
        let mut socket = TcpStream::connect_timeout(&at, timeout)
            .map_err(|e| failed(format!("cannot connect to {at}: {e}")))?;
        if let Err(e) = pace(&self.pace_socket, &socket, at, PaceSide::Connect) {
            warn_once(&format!(
                "the agent could not pace a direct stream ({e}): this rank's streams go through the agents"
            ));
            return Ok(None);
        }
        let _ = socket.set_nodelay(true);
        let mut hello = answer[..COOKIE].to_vec();
        hello.extend_from_slice(&(rank as u32).to_le_bytes());
        socket
            .write_all(&hello)
            .map_err(|e| failed(format!("the direct stream to {at}: {e}")))?;
        frame::write_message(tunnel, MOVED, &[])
            .and_then(|_| tunnel.flush())
            .map_err(|e| failed(e.to_string()))?;
        Ok(Some(socket))
    }
}

/// Register `socket`, connected to `peer` on another node, with the agent's pacing socket.
fn pace(name: &str, socket: &TcpStream, peer: SocketAddr, side: PaceSide) -> std::io::Result<()> {
    throttle_proto::os::rank_client::pace(name, socket.as_raw_fd(), peer, side)
}

fn warn_once(what: &str) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| eprintln!("throttle: {what}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection that presents `hello` to `direct`'s listener, and what `admit` made
    /// of it.
    fn present(direct: &Direct, listener: &TcpListener, hello: &[u8]) -> Option<usize> {
        let mut c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        c.write_all(hello).unwrap();
        drop(c);
        let (conn, _) = listener.accept().unwrap();
        direct.admit(conn, 4).map(|(src, _)| src)
    }

    /// Only the cookie a rank was handed, presented once, with that rank's number, opens
    /// a direct stream; anyone else who reaches the listener (another user on the node, a
    /// stranger on the network) is closed before a byte of theirs is read as a message.
    #[test]
    fn a_direct_stream_is_taken_with_its_ranks_cookie_only_once() {
        let (d, l) =
            Direct::listen("throttle-pace/none".into(), "127.0.0.1".parse().unwrap()).unwrap();
        let answer = d.invite(2).unwrap();
        let (cookie, at) = answer.split_at(COOKIE);
        assert_eq!(
            std::str::from_utf8(at).unwrap(),
            l.local_addr().unwrap().to_string()
        );
        let hello = |cookie: &[u8], rank: u32| {
            let mut h = cookie.to_vec();
            h.extend_from_slice(&rank.to_le_bytes());
            h
        };
        let mut wrong = cookie.to_vec();
        wrong[7] ^= 1;
        assert_eq!(present(&d, &l, &hello(&wrong, 2)), None, "a wrong cookie");
        assert_eq!(
            present(&d, &l, &hello(cookie, 1)),
            None,
            "another rank's claim"
        );
        assert_eq!(present(&d, &l, &hello(cookie, 9)), None, "no such rank");
        assert_eq!(present(&d, &l, &cookie[..10]), None, "a short hello");
        assert_eq!(present(&d, &l, &hello(cookie, 2)), Some(2));
        assert_eq!(
            present(&d, &l, &hello(cookie, 2)),
            None,
            "a cookie used twice"
        );
    }

    #[test]
    fn the_communicators_tags_are_reserved() {
        assert!(reserved(HELLO) && reserved(MOVED));
        assert!(!reserved(0) && !reserved(60) && !reserved(u32::MAX - 2));
    }
}
