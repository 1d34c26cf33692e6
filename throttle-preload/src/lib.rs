//! throttle-preload: throttle an unmodified program without root.
//!
//! Loaded with `LD_PRELOAD=libthrottle_preload.so`, this library puts the program's TCP
//! connections to other cluster nodes through the agent on its own node, the way the
//! kernel redirect (`throttle-agent --intercept`) does, but from user space:
//!
//! * `connect()` to another node's address (the agent's node list says which; ports from
//!   1024 up, never an agent's own ports) binds the socket to the source address the
//!   kernel would have chosen (unless the program bound one), connects it to the agent's
//!   preload port on loopback instead and hands over the destination. The agents carry it
//!   like any intercepted connection and answer with the errno a direct connect would
//!   have met. A blocking `connect()` returns it; a non-blocking one returns EINPROGRESS,
//!   the socket turns writable, and `SO_ERROR` reports it (0 on success).
//! * `getpeername()` on such a socket answers the destination, not the agent;
//!   `getsockname()` needs nothing: the socket really has the program's source address.
//! * `accept()`/`accept4()` of a connection the agent delivered (it comes from this
//!   node's own address) ask the agent for the original source and report it, as do
//!   later `getpeername()` calls: Open MPI drops connections from unexpected addresses.
//! * Everything else (other families, UDP, loopback and non-cluster addresses, a missing
//!   agent) goes straight to the C library (loopback ones after asking the agent: on a
//!   loopback cluster they are the nodes'). Without an agent the program runs unthrottled
//!   and the library says so once on stderr.
//! * With kernel-paced links (the agent's node list says so; `throttle-agent --links
//!   kernel`), `connect()` to another node registers the socket with the agent, which
//!   sets its pacing rate, and then connects it to its peer directly; an accepted
//!   connection from another node is registered as it is accepted. No byte passes the
//!   agent; `getpeername()` needs nothing. A socket the agent cannot pace is carried
//!   through it as above.
//! * On a node of a loopback cluster (the agent says the nodes share this network stack)
//!   the program also sees the machine as that node: [`node`].
//!
//! What it cannot see: static binaries, raw system calls, io_uring. Settings, from the
//! environment: `THROTTLE_PRELOAD_AGENT` (the preload port, `127.0.0.1:7602`),
//! `THROTTLE_PRELOAD_QUIET=1` (no warning), `THROTTLE_PRELOAD_PEER_REWRITE=0` (report the
//! agent as the peer of delivered connections: a diagnostic that shows why the rewrite is
//! needed).

pub mod agent;
pub mod node;
pub mod real;
pub mod sockaddr;
pub mod table;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};

use libc::{c_int, c_void, sockaddr as c_sockaddr, socklen_t};

use throttle_proto::preload::PaceSide;

use crate::real::real;
use crate::table::Record;

fn set_errno(e: i32) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

fn fail(e: i32) -> c_int {
    set_errno(e);
    -1
}

fn flag(name: &str) -> Option<bool> {
    std::env::var(name)
        .ok()
        .map(|v| !matches!(v.as_str(), "0" | "" | "no" | "false"))
}

/// Write `msg()` on stderr the first time `said` is asked, unless THROTTLE_PRELOAD_QUIET.
fn say_once(said: &AtomicBool, msg: impl FnOnce() -> String) {
    if flag("THROTTLE_PRELOAD_QUIET") == Some(true) || said.swap(true, Ordering::Relaxed) {
        return;
    }
    let msg = msg();
    // SAFETY: writing a valid buffer to stderr.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

/// Say once per process that connections are not throttled, and why.
fn warn_once(why: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    say_once(&SAID, || {
        format!(
        "throttle-preload: no agent at {} ({why}): this program's connections to other nodes are NOT throttled (start the agents with --preload, or set THROTTLE_PRELOAD_AGENT)\n",
        agent::address()
    )
    });
}

/// Say once per process that a connection to an address where only another node of this
/// user's listens was refused: on a loopback cluster every node has its own address, and
/// 127.0.0.1 (or this machine's other addresses) is not where the other nodes' programs
/// are.
fn warn_misaddressed(dst: SocketAddr, other: IpAddr, own: IpAddr) {
    static SAID: AtomicBool = AtomicBool::new(false);
    say_once(&SAID, || {
        format!(
        "throttle-preload: no server of this node ({own}) listens at {dst}, but a program of node {other} does at port {}: connect to {other}:{} (each node of this loopback cluster has its own address); the connection to {dst} is refused\n",
        dst.port(),
        dst.port(),
    )
    });
}

/// Say once per process that the agent carries connections it could not pace.
fn warn_carried(why: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    say_once(&SAID, || {
        format!("throttle-preload: the agent could not pace a connection in the kernel ({why}): such connections are carried through the agent instead\n")
    });
}

/// Say once per process that an accepted connection could not be paced.
fn warn_unpaced(why: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    say_once(&SAID, || {
        format!("throttle-preload: an accepted connection from another node could not be paced ({why}): what this program sends on it is NOT throttled\n")
    });
}

pub(crate) fn int_opt(fd: c_int, level: c_int, name: c_int) -> Option<c_int> {
    let mut v: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: an int-sized option into an int.
    let r = unsafe {
        (real().getsockopt)(
            fd,
            level,
            name,
            &mut v as *mut c_int as *mut c_void,
            &mut len,
        )
    };
    (r == 0).then_some(v)
}

/// The source address the kernel would give a connection from a socket of `family` to
/// `dst` (a connected UDP socket shows it without sending anything).
fn route_source(family: c_int, dst: SocketAddr) -> Option<SocketAddr> {
    // SAFETY: plain socket calls on a descriptor of our own, closed before returning.
    unsafe {
        let fd = libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return None;
        }
        let (st, len) = sockaddr::to_c(sockaddr::for_family(dst, family));
        let ok = (real().connect)(fd, &st as *const _ as *const c_sockaddr, len) == 0;
        let src = if ok { sockaddr::local(fd) } else { None };
        (real().close)(fd);
        src.map(|s| SocketAddr::new(s.ip(), 0))
    }
}

/// `connect()` through the agent, or `None` to leave it to the C library.
///
/// # Safety
/// `addr` is null or points to `len` readable bytes, as `connect(2)` requires.
unsafe fn intercept_connect(fd: c_int, addr: *const c_sockaddr, len: socklen_t) -> Option<c_int> {
    // SAFETY: the caller passed `len` readable bytes at `addr` (or null, which `read`
    // refuses).
    let dst = unsafe { sockaddr::read(addr, len) }?;
    // A second connect on a socket we carry: what the kernel says of a connected socket,
    // or the failure a non-blocking connect has not yet reported.
    match table::get(fd) {
        Some(Record::Connected { .. }) => return Some(fail(libc::EISCONN)),
        Some(Record::Failed { .. }) => return table::take_error(fd).map(fail),
        _ => {}
    }
    let ip = dst.ip().to_canonical();
    if ip.is_multicast() || !node::is_tcp(fd) {
        return None;
    }
    let nodes = match agent::nodes() {
        Ok(n) => n,
        Err(agent::NoAgent(why)) => {
            warn_once(&why);
            return None;
        }
    };
    let emulated = node::of(&nodes);
    if ip.is_unspecified() || !nodes.intercepts(dst) {
        let own = emulated?;
        // The address on every interface is, to connect(2), loopback of its family.
        let asked = if !ip.is_unspecified() {
            dst
        } else if ip.is_ipv4() {
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), dst.port())
        } else {
            SocketAddr::new(std::net::Ipv6Addr::LOCALHOST.into(), dst.port())
        };
        // A node of a loopback cluster: localhost is the node (its own listener), and a
        // program that names an address where only another node listens hears why.
        return match node::resolve(own, &nodes, asked) {
            node::Local::Own(there) => {
                let family = int_opt(fd, libc::SOL_SOCKET, libc::SO_DOMAIN)?;
                // An IPv6-only socket cannot reach the node's (IPv4) address: refused, as
                // a host without that server would, never sent to `::1` as asked.
                if family == libc::AF_INET6
                    && int_opt(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) == Some(1)
                {
                    return Some(fail(libc::ECONNREFUSED));
                }
                if !node::bound(fd) {
                    node::bind_source(fd, own);
                }
                let (st, slen) = sockaddr::to_c(sockaddr::for_family(there, family));
                // SAFETY: a valid address on the program's own socket.
                Some(unsafe { (real().connect)(fd, &st as *const _ as *const c_sockaddr, slen) })
            }
            node::Local::Misaddressed(other) => {
                warn_misaddressed(dst, other, own);
                Some(fail(libc::ECONNREFUSED))
            }
            node::Local::AsAsked => None,
        };
    }
    let family = int_opt(fd, libc::SOL_SOCKET, libc::SO_DOMAIN)?;
    // The source: the program's, or the one the kernel would choose for `dst` (on a node
    // of a loopback cluster, the node's address). The agent carries the socket's real
    // address, so it must be this node's, not loopback's.
    if !node::bound(fd) {
        match emulated {
            Some(own) => node::bind_source(fd, own),
            None => {
                if let Some(src) = route_source(family, dst) {
                    let (st, slen) = sockaddr::to_c(src);
                    // SAFETY: a valid address; a failure leaves the socket unbound, which
                    // the agent handles (it then carries this node's address).
                    unsafe { (real().bind)(fd, &st as *const _ as *const c_sockaddr, slen) };
                }
            }
        }
    }
    // Kernel-paced links: the agent sets the socket's rate, and the program connects to
    // its peer itself. Where the agent cannot pace it, the agent carries it instead.
    if nodes.kernel_pacing {
        match agent::pace(fd, dst, PaceSide::Connect) {
            Ok(()) => return None,
            Err(agent::NoAgent(why)) => warn_carried(&why),
        }
    }
    // SAFETY: reading the descriptor's flags.
    let nonblocking = unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_NONBLOCK != 0;
    match agent::hand_over(fd, agent::address_for(family, dst), dst) {
        agent::Handover::NoAgent(why) => {
            warn_once(&why);
            None
        }
        agent::Handover::Answered(0) => {
            table::put(fd, Record::Connected { peer: dst });
            Some(if nonblocking {
                fail(libc::EINPROGRESS)
            } else {
                0
            })
        }
        agent::Handover::Answered(errno) => {
            if nonblocking {
                table::put(fd, Record::Failed { errno });
                Some(fail(libc::EINPROGRESS))
            } else {
                Some(fail(errno))
            }
        }
    }
}

/// After a successful accept: a connection the agent delivered reports its original
/// source (in `addr`, and later in `getpeername`).
///
/// # Safety
/// `addr` and `len` are what the program gave `accept(2)`: both null, or `len` points to
/// the size of the writable buffer at `addr`.
unsafe fn after_accept(conn: c_int, addr: *mut c_sockaddr, len: *mut socklen_t) {
    let Some(via) = sockaddr::peer(conn) else {
        return;
    };
    // Deliveries come from this node's own address; anything else is left alone without
    // asking the agent, and so are connections from the agent's own address on 127.0.0.1
    // or ::1 (never a delivery, and in a process that is itself preloaded and accepts
    // there, asking would wait on itself). On a loopback cluster the agent's address is
    // the node's, where deliveries come from.
    let v = via.ip().to_canonical();
    if v == agent::address().ip().to_canonical()
        && (v == IpAddr::V4(Ipv4Addr::LOCALHOST) || v == IpAddr::V6(Ipv6Addr::LOCALHOST))
    {
        return;
    }
    let Some(nodes) = agent::cached_nodes().or_else(|| agent::nodes().ok()) else {
        return;
    };
    // Kernel-paced links: a connection straight from another node's program is paced on
    // this side too (what this program sends back crosses the link as well).
    if nodes.kernel_pacing && nodes.nodes.contains(&v) {
        if let Err(agent::NoAgent(why)) = agent::pace(conn, via, PaceSide::Accept) {
            warn_unpaced(&why);
        }
        return;
    }
    if flag("THROTTLE_PRELOAD_PEER_REWRITE") == Some(false) {
        return;
    }
    let Some(own) = nodes.own else {
        return;
    };
    if via.ip().to_canonical() != own {
        return;
    }
    let Ok(Some(src)) = agent::peer_of(via) else {
        return;
    };
    let family = int_opt(conn, libc::SOL_SOCKET, libc::SO_DOMAIN).unwrap_or(libc::AF_INET);
    let src = sockaddr::for_family(src, family);
    table::put(conn, Record::Accepted { peer: src });
    // SAFETY: the caller's `addr` and `len` are the program's accept buffers (or null,
    // which `write` leaves alone).
    unsafe { sockaddr::write(src, addr, len) };
}

/// # Safety
/// As `connect(2)`.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const c_sockaddr, len: socklen_t) -> c_int {
    // SAFETY: the program's arguments, as connect(2) requires them.
    match unsafe { intercept_connect(fd, addr, len) } {
        Some(r) => r,
        // SAFETY: the C library's connect with the program's own arguments.
        None => unsafe { (real().connect)(fd, addr, len) },
    }
}

/// # Safety
/// As `accept(2)`.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut c_sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the C library's accept with the program's own arguments.
    let conn = unsafe { (real().accept)(fd, addr, len) };
    if conn >= 0 {
        // SAFETY: the calling thread's errno location is always valid.
        let saved = unsafe { *libc::__errno_location() };
        // SAFETY: the buffers the program gave accept, which it just filled.
        unsafe { after_accept(conn, addr, len) };
        set_errno(saved);
    }
    conn
}

/// # Safety
/// As `accept4(2)`.
#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut c_sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    // SAFETY: the C library's accept4 with the program's own arguments.
    let conn = unsafe { (real().accept4)(fd, addr, len, flags) };
    if conn >= 0 {
        // SAFETY: the calling thread's errno location is always valid.
        let saved = unsafe { *libc::__errno_location() };
        // SAFETY: the buffers the program gave accept4, which it just filled.
        unsafe { after_accept(conn, addr, len) };
        set_errno(saved);
    }
    conn
}

/// # Safety
/// As `getpeername(2)`.
#[no_mangle]
pub unsafe extern "C" fn getpeername(
    fd: c_int,
    addr: *mut c_sockaddr,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: the C library's getpeername with the program's own arguments.
    let r = unsafe { (real().getpeername)(fd, addr, len) };
    if r == 0 {
        let peer = match table::get(fd) {
            Some(Record::Connected { peer }) => {
                let family =
                    int_opt(fd, libc::SOL_SOCKET, libc::SO_DOMAIN).unwrap_or(libc::AF_INET);
                Some(sockaddr::for_family(peer, family))
            }
            Some(Record::Accepted { peer }) => Some(peer),
            _ => None,
        };
        if let Some(peer) = peer {
            // SAFETY: the program's buffers, valid as getpeername(2) requires (the real
            // call just succeeded on them).
            unsafe { sockaddr::write(peer, addr, len) };
        }
    }
    r
}

/// # Safety
/// As `getsockopt(2)`.
#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: the C library's getsockopt with the program's own arguments.
    let r = unsafe { (real().getsockopt)(fd, level, name, value, len) };
    if r == 0
        && level == libc::SOL_SOCKET
        && name == libc::SO_ERROR
        && !value.is_null()
        && !len.is_null()
        // SAFETY: `len` is not null and the real call just read and wrote it.
        && unsafe { *len } as usize >= std::mem::size_of::<c_int>()
    {
        // A non-blocking connect through the agent that failed: its errno, once (the
        // real pending error, the agent's reset, was just consumed above).
        if let Some(e) = table::take_error(fd) {
            // SAFETY: `value` holds at least an int (checked above); the program's
            // buffer need not be aligned for one.
            unsafe { value.cast::<c_int>().write_unaligned(e) };
        }
    }
    r
}

/// # Safety
/// As `bind(2)`.
#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const c_sockaddr, len: socklen_t) -> c_int {
    // SAFETY: the program's arguments, as bind(2) requires them.
    match unsafe { node::bind(fd, addr, len) } {
        Some(r) => r,
        // SAFETY: the C library's bind with the program's own arguments.
        None => unsafe { (real().bind)(fd, addr, len) },
    }
}

/// `ioctl(2)`, declared with its one optional argument: every request passes at most
/// one, an integer or a pointer, where the C ABIs of Linux's 64-bit targets put a fixed
/// third argument; it is passed on as it came.
///
/// # Safety
/// As `ioctl(2)`: `arg` is what `request` expects.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: libc::c_ulong, arg: *mut c_void) -> c_int {
    // SAFETY: the C library's ioctl with the program's own arguments.
    let r = unsafe { (real().ioctl)(fd, request, arg) };
    if r == 0 {
        // SAFETY: the calling thread's errno location is always valid.
        let saved = unsafe { *libc::__errno_location() };
        // SAFETY: `arg` is the argument the real call just filled for `request`.
        unsafe { node::after_ioctl(request, arg) };
        set_errno(saved);
    }
    r
}

/// # Safety
/// As `getifaddrs(3)`.
#[no_mangle]
pub unsafe extern "C" fn getifaddrs(list: *mut *mut libc::ifaddrs) -> c_int {
    // SAFETY: the C library's getifaddrs with the program's own argument.
    let r = unsafe { (real().getifaddrs)(list) };
    if r == 0 && !list.is_null() {
        // SAFETY: the calling thread's errno location is always valid.
        let saved = unsafe { *libc::__errno_location() };
        // SAFETY: the list the real call just returned.
        unsafe { node::after_getifaddrs(*list) };
        set_errno(saved);
    }
    r
}

/// # Safety
/// As `close(2)`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if table::any() {
        table::forget(fd);
    }
    // SAFETY: the C library's close with the program's own descriptor.
    unsafe { (real().close)(fd) }
}

#[cfg(test)]
mod tests;
