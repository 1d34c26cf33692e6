//! Talking to the agent on this node: the node list (cached for a second), the handover
//! of a program's socket, the original source of a delivered connection, and, with
//! kernel-paced links, the registration of a socket the kernel is to pace.
//!
//! All I/O is on raw descriptors with `poll` and time limits, through the C library's own
//! calls ([`crate::real`](mod@crate::real)): this runs inside other programs' `connect()` and `accept()`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libc::c_int;
use throttle_proto::preload::{
    ConnectReply, NodeList, PaceReply, PaceRequest, PaceSide, PeerReply, Request, ADDR_LEN,
    CONNECT_REPLY_LEN, DEFAULT_PORT, PEER_REPLY_LEN,
};

use crate::real::real;
use crate::sockaddr;

/// How long a node list is used before it is asked for again (nodes may join).
const NODES_TTL: Duration = Duration::from_secs(1);
/// Limit for the agent's quick answers (node list, peer lookup, the loopback connect).
const QUICK: Duration = Duration::from_secs(2);
/// Limit for the far side's answer to a handover: the agents' own connect limit (10 s)
/// and their handshake, with room.
const HANDOVER: Duration = Duration::from_secs(30);

/// The agent's preload port: `THROTTLE_PRELOAD_AGENT` (`127.0.0.1:7602` by default).
pub fn address() -> SocketAddr {
    static ADDR: std::sync::OnceLock<SocketAddr> = std::sync::OnceLock::new();
    *ADDR.get_or_init(|| {
        std::env::var("THROTTLE_PRELOAD_AGENT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(SocketAddr::from((Ipv4Addr::LOCALHOST, DEFAULT_PORT)))
    })
}

/// The agent's address as a socket of `family` reaches it: on an IPv6 socket, the
/// v4-mapped form for a v4-mapped destination, else ::1.
pub fn address_for(family: c_int, dst: SocketAddr) -> SocketAddr {
    let a = address();
    match (family, a.ip()) {
        (libc::AF_INET6, IpAddr::V4(ip)) => match dst.ip() {
            IpAddr::V6(d) if d.to_ipv4_mapped().is_some() => {
                SocketAddr::new(IpAddr::V6(ip.to_ipv6_mapped()), a.port())
            }
            _ if ip.is_loopback() => SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), a.port()),
            _ => SocketAddr::new(IpAddr::V6(ip.to_ipv6_mapped()), a.port()),
        },
        _ => a,
    }
}

/// Why the agent could not be asked.
#[derive(Debug)]
pub struct NoAgent(pub String);

static NODES: Mutex<Option<(Instant, Option<Arc<NodeList>>)>> = Mutex::new(None);

/// The node list, from the cache while it is fresh. `Err` when the agent cannot be
/// reached (also cached for a second, so a missing agent costs one attempt a second).
pub fn nodes() -> Result<Arc<NodeList>, NoAgent> {
    {
        let cache = NODES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, list)) = cache.as_ref() {
            if at.elapsed() < NODES_TTL {
                return list
                    .clone()
                    .ok_or_else(|| NoAgent("not reachable a moment ago".into()));
            }
        }
    }
    // Asked outside the lock: a fork meanwhile must not leave a child with it held.
    let fetched = fetch_nodes();
    let mut cache = NODES.lock().unwrap_or_else(|e| e.into_inner());
    *cache = Some((Instant::now(), fetched.as_ref().ok().cloned()));
    fetched
}

/// The node list in the cache, fresh or not (for `accept`, which must stay quick).
pub fn cached_nodes() -> Option<Arc<NodeList>> {
    let cache = NODES.lock().unwrap_or_else(|e| e.into_inner());
    cache.as_ref().and_then(|(_, l)| l.clone())
}

/// [`trusted_listener`] for the exact address the library is about to connect to or ask
/// (127.0.0.1, ::1 or a v4-mapped form: each may be held by someone else), asked of the
/// kernel each time (one socket's lookup, microseconds): a verdict kept for a while would
/// hand connections to a squatter that bound the port after an agent stopped.
fn trusted(addr: SocketAddr) -> Result<(), NoAgent> {
    trusted_listener(addr)
}

/// Whether the listener at `addr` belongs to this program's user or to root: another
/// user squatting the port while no agent runs would otherwise receive the program's
/// connections and decide what it sees as their peers. `Err` says whose it is.
fn trusted_listener(addr: SocketAddr) -> Result<(), NoAgent> {
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    let me = unsafe { libc::geteuid() };
    match throttle_proto::os::socket_table::listener_owner(addr) {
        Some(uid) if uid == me || uid == 0 => Ok(()),
        Some(uid) => Err(NoAgent(format!(
            "the listener there belongs to uid {uid}, not to this user ({me}) or root: not an agent this program trusts"
        ))),
        // No listener there (none of any user's, the kernel says): no agent to trust.
        None => Err(NoAgent(format!("nothing listens at {addr}"))),
    }
}

fn fetch_nodes() -> Result<Arc<NodeList>, NoAgent> {
    trusted(address())?;
    let s = Sock::open(address())?;
    s.send_all(&Request::Nodes.encode(), QUICK)?;
    let mut head = [0u8; 4];
    s.recv_exact(&mut head, QUICK)?;
    let n = NodeList::entries(&head).map_err(|e| NoAgent(e.to_string()))?;
    let mut body = vec![0u8; n * (1 + ADDR_LEN)];
    s.recv_exact(&mut body, QUICK)?;
    NodeList::decode(n, &body)
        .map(Arc::new)
        .map_err(|e| NoAgent(e.to_string()))
}

/// The original source of the connection the agent delivered from `via`.
pub fn peer_of(via: SocketAddr) -> Result<Option<SocketAddr>, NoAgent> {
    // Whoever holds the port now answers what the program sees as its peer: an agent of
    // this user's or root's only (the node list checked may be older).
    trusted(address())?;
    let s = Sock::open(address())?;
    s.send_all(&Request::Peer { via }.encode(), QUICK)?;
    let mut b = [0u8; PEER_REPLY_LEN];
    s.recv_exact(&mut b, QUICK)?;
    Ok(PeerReply::decode(&b)
        .map_err(|e| NoAgent(e.to_string()))?
        .src)
}

/// What became of a handover.
pub enum Handover {
    /// The agent answered: 0 (connected) or the errno for the program.
    Answered(i32),
    /// The agent could not be reached; the socket is unconnected again (a failed connect
    /// leaves a TCP socket free for another).
    NoAgent(String),
}

/// Connect the program's socket `fd` to the agent at `agent` and ask for `dst`; wait for
/// the answer whatever the socket's blocking mode.
pub fn hand_over(fd: c_int, agent: SocketAddr, dst: SocketAddr) -> Handover {
    // The exact address the program's connection goes to: the node list came from
    // 127.0.0.1, an IPv6 socket goes to ::1, which another user may hold.
    if let Err(e) = trusted(agent) {
        return Handover::NoAgent(e.0);
    }
    let s = Borrowed(fd);
    if let Err(e) = s.connect(agent, QUICK) {
        return Handover::NoAgent(e.0);
    }
    let asked = s
        .send_all(&Request::Connect { dst }.encode(), QUICK)
        .and_then(|_| {
            let mut b = [0u8; CONNECT_REPLY_LEN];
            s.recv_exact(&mut b, HANDOVER).map(|_| b)
        });
    match asked {
        Ok(b) => Handover::Answered(ConnectReply::decode(&b).errno),
        // Connected to the agent but no answer: as a direct connect that never completes.
        Err(_) => Handover::Answered(libc::ETIMEDOUT),
    }
}

/// Register the program's socket `fd`, whose peer is (or is about to be) `peer` on
/// another node, with the agent's pacing socket; `Ok` once the agent set its rate. The
/// agent must be this user's or root's (`SO_PEERCRED`: anyone may bind an abstract
/// name). Where Yama restricts tracing to descendants, the agent is named this process's
/// tracer first: taking the socket (`pidfd_getfd`) needs what tracing needs.
pub fn pace(fd: c_int, peer: SocketAddr, side: PaceSide) -> Result<(), NoAgent> {
    let s = UnixSock::open(&throttle_proto::preload::pace_socket_name(address()))?;
    let agent = s.peer_owner()?;
    allow_tracer(agent);
    s.send_all(&PaceRequest { side, fd, peer }.encode(), QUICK)?;
    let mut b = [0u8; CONNECT_REPLY_LEN];
    s.recv_exact(&mut b, QUICK)?;
    match PaceReply::decode(&b).errno {
        0 => Ok(()),
        e => Err(NoAgent(format!(
            "the agent could not pace it: {}",
            std::io::Error::from_raw_os_error(e)
        ))),
    }
}

/// Let process `pid` (the agent) take this process's sockets where Yama allows tracing
/// only by ancestors (`kernel.yama.ptrace_scope = 1`): once per process and agent (a
/// restarted agent is another process), before the first registration with it. Two
/// threads registering at once may both set it: harmless.
fn allow_tracer(pid: i32) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static DONE: AtomicU64 = AtomicU64::new(0);
    // SAFETY: getpid cannot fail.
    let me = unsafe { libc::getpid() };
    let key = (u64::from(me as u32) << 32) | u64::from(pid as u32);
    if DONE.load(Ordering::Acquire) == key {
        return;
    }
    let scoped =
        std::fs::read("/proc/sys/kernel/yama/ptrace_scope").is_ok_and(|v| v.first() == Some(&b'1'));
    if scoped {
        // SAFETY: PR_SET_PTRACER takes a pid; it changes nothing but who may trace us.
        unsafe { libc::prctl(libc::PR_SET_PTRACER, pid as libc::c_ulong, 0, 0, 0) };
    }
    DONE.store(key, Ordering::Release);
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A descriptor used with poll-based time limits, whatever its blocking mode.
trait Io {
    fn fd(&self) -> c_int;

    fn wait(&self, events: libc::c_short, limit: Duration, until: Instant) -> Result<(), NoAgent> {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(NoAgent(format!("no answer within {limit:?}")));
            }
            let mut p = libc::pollfd {
                fd: self.fd(),
                events,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut p, 1, left.as_millis().clamp(1, 60_000) as c_int) };
            if r > 0 {
                return Ok(());
            }
            if r < 0 && errno() != libc::EINTR {
                return Err(NoAgent(std::io::Error::last_os_error().to_string()));
            }
        }
    }

    fn connect(&self, to: SocketAddr, limit: Duration) -> Result<(), NoAgent> {
        let (st, len) = sockaddr::to_c(to);
        // SAFETY: a valid address of `len` bytes.
        let r =
            unsafe { (real().connect)(self.fd(), &st as *const _ as *const libc::sockaddr, len) };
        if r == 0 {
            return Ok(());
        }
        let e = errno();
        if e != libc::EINPROGRESS && e != libc::EINTR {
            return Err(NoAgent(format!(
                "{to}: {}",
                std::io::Error::from_raw_os_error(e)
            )));
        }
        self.wait(libc::POLLOUT, limit, Instant::now() + limit)?;
        let mut err: c_int = 0;
        let mut len = std::mem::size_of::<c_int>() as libc::socklen_t;
        // SAFETY: an int-sized option into an int.
        unsafe {
            (real().getsockopt)(
                self.fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                &mut err as *mut c_int as *mut libc::c_void,
                &mut len,
            )
        };
        if err != 0 {
            return Err(NoAgent(format!(
                "{to}: {}",
                std::io::Error::from_raw_os_error(err)
            )));
        }
        Ok(())
    }

    fn send_all(&self, mut b: &[u8], limit: Duration) -> Result<(), NoAgent> {
        let until = Instant::now() + limit;
        while !b.is_empty() {
            // SAFETY: `b` is valid for its length.
            let n =
                unsafe { libc::send(self.fd(), b.as_ptr().cast(), b.len(), libc::MSG_NOSIGNAL) };
            if n > 0 {
                b = &b[n as usize..];
                continue;
            }
            match errno() {
                libc::EAGAIN | libc::EINTR => self.wait(libc::POLLOUT, limit, until)?,
                _ => return Err(NoAgent(std::io::Error::last_os_error().to_string())),
            }
        }
        Ok(())
    }

    fn recv_exact(&self, b: &mut [u8], limit: Duration) -> Result<(), NoAgent> {
        let until = Instant::now() + limit;
        let mut got = 0;
        while got < b.len() {
            self.wait(libc::POLLIN, limit, until)?;
            // SAFETY: the rest of `b` is valid and writable. MSG_DONTWAIT: poll said
            // readable, and a blocking socket must not wait here past the limit.
            let n = unsafe {
                libc::recv(
                    self.fd(),
                    b[got..].as_mut_ptr().cast(),
                    b.len() - got,
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                got += n as usize;
            } else if n == 0 {
                return Err(NoAgent("the agent closed the connection".into()));
            } else if !matches!(errno(), libc::EAGAIN | libc::EINTR) {
                return Err(NoAgent(std::io::Error::last_os_error().to_string()));
            }
        }
        Ok(())
    }
}

/// The program's socket, used for the handover (not ours to close).
struct Borrowed(c_int);

impl Io for Borrowed {
    fn fd(&self) -> c_int {
        self.0
    }
}

/// A Unix socket of our own to the agent's pacing socket, closed on drop.
struct UnixSock(c_int);

impl UnixSock {
    fn open(name: &str) -> Result<UnixSock, NoAgent> {
        // SAFETY: plain socket creation.
        let fd = unsafe {
            libc::socket(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        };
        if fd < 0 {
            return Err(NoAgent(std::io::Error::last_os_error().to_string()));
        }
        let s = UnixSock(fd);
        // SAFETY: all-zero is a valid sockaddr_un.
        let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = name.as_bytes();
        if bytes.len() + 1 > addr.sun_path.len() {
            return Err(NoAgent(format!("pacing socket name too long: {name}")));
        }
        // An abstract name: a leading NUL, then the name (no terminator).
        for (i, b) in bytes.iter().enumerate() {
            addr.sun_path[i + 1] = *b as libc::c_char;
        }
        let len = (std::mem::size_of::<libc::sa_family_t>() + 1 + bytes.len()) as libc::socklen_t;
        // SAFETY: a valid sockaddr_un of `len` bytes. A Unix connect completes at once
        // or fails (EAGAIN: the agent's queue is full).
        let r = unsafe {
            (real().connect)(
                fd,
                &addr as *const libc::sockaddr_un as *const libc::sockaddr,
                len,
            )
        };
        if r != 0 {
            return Err(NoAgent(format!(
                "no pacing socket @{name}: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(s)
    }

    /// The pid of the process at the other end, if it is this user's or root's.
    fn peer_owner(&self) -> Result<i32, NoAgent> {
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: SO_PEERCRED fills a ucred of `len` bytes.
        let r = unsafe {
            (real().getsockopt)(
                self.0,
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                &mut cred as *mut libc::ucred as *mut libc::c_void,
                &mut len,
            )
        };
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        if r != 0 {
            return Err(NoAgent(std::io::Error::last_os_error().to_string()));
        }
        if cred.uid != me && cred.uid != 0 {
            return Err(NoAgent(format!(
                "the pacing socket belongs to uid {}, not to this user ({me}) or root: not an agent this program trusts",
                cred.uid
            )));
        }
        Ok(cred.pid)
    }
}

impl Io for UnixSock {
    fn fd(&self) -> c_int {
        self.0
    }
}

impl Drop for UnixSock {
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { (real().close)(self.0) };
    }
}

/// A socket of our own to the agent, closed on drop.
struct Sock(c_int);

impl Sock {
    fn open(to: SocketAddr) -> Result<Sock, NoAgent> {
        let family = if to.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        // SAFETY: plain socket creation.
        let fd = unsafe {
            libc::socket(
                family,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        };
        if fd < 0 {
            return Err(NoAgent(std::io::Error::last_os_error().to_string()));
        }
        let s = Sock(fd);
        s.connect(to, QUICK)?;
        Ok(s)
    }
}

impl Io for Sock {
    fn fd(&self) -> c_int {
        self.0
    }
}

impl Drop for Sock {
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { (real().close)(self.0) };
    }
}
