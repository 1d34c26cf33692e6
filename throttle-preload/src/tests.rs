//! The interposed calls' semantics, in this test process itself: the test binary defines
//! `connect`, `accept4`, ... (this crate's exports), so every socket call in it, std's
//! included, goes through the library as in a preloaded program.
//!
//! The agent here is a scripted peer speaking the preload protocol on loopback (no root,
//! no second host): it says 198.18.255.1 and 2001:2::ff are other nodes, relays a
//! connection for port P there to 127.0.0.1:P, refuses port 1999 as a far side with
//! nothing listening would, and "delivers" connections from 127.0.0.2. The real agents
//! are exercised end to end in `tests/tests/preload.rs`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Mutex, Once};

use throttle_proto::preload::{ConnectReply, NodeList, PeerReply, Request, REQUEST_LEN};

const NODE: &str = "198.18.255.1";
const REFUSED_PORT: u16 = 1999;

/// Sources the scripted agent saw, by destination port.
static SEEN: Mutex<Option<HashMap<u16, SocketAddr>>> = Mutex::new(None);
/// Deliveries: the agent-side address and the source it stands for.
static DELIVERED: Mutex<Option<HashMap<SocketAddr, SocketAddr>>> = Mutex::new(None);

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::env::set_var("THROTTLE_PRELOAD_AGENT", format!("127.0.0.1:{port}"));
        std::env::set_var("THROTTLE_PRELOAD_QUIET", "0");
        std::thread::spawn(move || serve(l));
        // The same port on ::1 for native IPv6 sockets, where this host has IPv6.
        if let Ok(l6) = TcpListener::bind(("::1", port)) {
            std::thread::spawn(move || serve(l6));
        }
    });
}

fn serve(l: TcpListener) {
    for c in l.incoming() {
        let Ok(c) = c else { continue };
        std::thread::spawn(move || {
            let _ = answer(c);
        });
    }
}

fn answer(mut c: TcpStream) -> std::io::Result<()> {
    let mut b = [0u8; REQUEST_LEN];
    c.read_exact(&mut b)?;
    match Request::decode(&b).unwrap() {
        Request::Nodes => c.write_all(
            &NodeList {
                nodes: vec![NODE.parse().unwrap(), "2001:2::ff".parse().unwrap()],
                exempt: vec![SocketAddr::new(NODE.parse().unwrap(), 7601)],
                own: Some("127.0.0.2".parse().unwrap()),
                shared_stack: false,
                kernel_pacing: false,
            }
            .encode(),
        ),
        Request::Peer { via } => {
            let src = DELIVERED
                .lock()
                .unwrap()
                .as_ref()
                .and_then(|m| m.get(&via).copied());
            c.write_all(&PeerReply { src }.encode())
        }
        Request::Connect { dst } => {
            SEEN.lock()
                .unwrap()
                .get_or_insert_with(HashMap::new)
                .insert(dst.port(), c.peer_addr()?);
            if dst.port() == REFUSED_PORT {
                c.write_all(
                    &ConnectReply {
                        errno: libc::ECONNREFUSED,
                    }
                    .encode(),
                )?;
                // Closed with a reset, as the agent does.
                let linger = libc::linger {
                    l_onoff: 1,
                    l_linger: 0,
                };
                // SAFETY: an int-sized option from an int on the stream's own socket.
                unsafe {
                    libc::setsockopt(
                        std::os::fd::AsRawFd::as_raw_fd(&c),
                        libc::SOL_SOCKET,
                        libc::SO_LINGER,
                        &linger as *const libc::linger as *const libc::c_void,
                        std::mem::size_of::<libc::linger>() as libc::socklen_t,
                    )
                };
                return Ok(());
            }
            let far = TcpStream::connect(("127.0.0.1", dst.port()))?;
            c.write_all(&ConnectReply { errno: 0 }.encode())?;
            let (mut a, mut b) = (c.try_clone()?, far.try_clone()?);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut a, &mut b);
                let _ = b.shutdown(std::net::Shutdown::Write);
            });
            let (mut a, mut b) = (far, c);
            let _ = std::io::copy(&mut a, &mut b);
            let _ = b.shutdown(std::net::Shutdown::Write);
            Ok(())
        }
    }
}

/// An echo server on 127.0.0.1; its port.
fn echo_server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            std::thread::spawn(move || {
                let mut r = c.try_clone().unwrap();
                let _ = std::io::copy(&mut r, &mut c);
            });
        }
    });
    port
}

fn seen(port: u16) -> Option<SocketAddr> {
    SEEN.lock()
        .unwrap()
        .as_ref()
        .and_then(|m| m.get(&port).copied())
}

fn echo(s: &mut TcpStream, text: &[u8]) {
    s.write_all(text).unwrap();
    let mut back = vec![0u8; text.len()];
    s.read_exact(&mut back).unwrap();
    assert_eq!(back, text);
}

fn node(port: u16) -> SocketAddr {
    SocketAddr::new(NODE.parse().unwrap(), port)
}

#[test]
fn a_blocking_connect_to_another_node_goes_through_the_agent() {
    setup();
    let port = echo_server();
    let mut s = TcpStream::connect(node(port)).expect("connected through the agent");
    echo(&mut s, b"hello through the agent");
    assert_eq!(
        s.peer_addr().unwrap(),
        node(port),
        "getpeername: the destination"
    );
    let src = seen(port).expect("the agent carried it");
    assert_eq!(
        s.local_addr().unwrap(),
        src,
        "getsockname: the address the agent carries as the source"
    );
}

#[test]
fn a_refused_connect_gets_the_errno_a_direct_one_would() {
    setup();
    let e = TcpStream::connect(node(REFUSED_PORT)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
}

/// A raw non-blocking socket of `family`; its descriptor.
fn nonblocking_socket(family: libc::c_int) -> libc::c_int {
    // SAFETY: plain socket creation.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0) };
    assert!(fd >= 0);
    fd
}

fn raw_connect(fd: libc::c_int, to: SocketAddr) -> Result<(), i32> {
    let (st, len) = crate::sockaddr::to_c(to);
    // SAFETY: a valid address of `len` bytes.
    let r = unsafe { libc::connect(fd, &st as *const _ as *const libc::sockaddr, len) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap())
    }
}

fn poll_out(fd: libc::c_int) -> i16 {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    assert_eq!(
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, 5000) },
        1,
        "writable in time"
    );
    p.revents
}

fn so_error(fd: libc::c_int) -> i32 {
    let mut v: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: an int-sized option into an int.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    assert_eq!(r, 0);
    v
}

#[test]
fn a_non_blocking_connect_is_in_progress_then_writable_then_reports_its_error() {
    setup();
    let port = echo_server();
    let fd = nonblocking_socket(libc::AF_INET);
    assert_eq!(raw_connect(fd, node(port)), Err(libc::EINPROGRESS));
    assert!(poll_out(fd) & libc::POLLOUT != 0);
    assert_eq!(so_error(fd), 0, "connected");
    assert_eq!(
        raw_connect(fd, node(port)),
        Err(libc::EISCONN),
        "connect again on a connected socket"
    );
    // SAFETY: the socket created above, owned by the stream from here on.
    let mut s = unsafe { <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    s.set_nonblocking(false).unwrap();
    echo(&mut s, b"non-blocking");

    let fd = nonblocking_socket(libc::AF_INET);
    assert_eq!(raw_connect(fd, node(REFUSED_PORT)), Err(libc::EINPROGRESS));
    poll_out(fd);
    assert_eq!(so_error(fd), libc::ECONNREFUSED, "the far side's errno");
    assert_ne!(so_error(fd), libc::ECONNREFUSED, "reported once");
    // SAFETY: this test's own descriptor, closed once.
    unsafe { libc::close(fd) };
}

#[test]
fn a_socket_bound_before_connect_keeps_its_source() {
    setup();
    let port = echo_server();
    // SAFETY: plain socket creation.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    let (st, len) = crate::sockaddr::to_c("127.0.0.3:0".parse().unwrap());
    assert_eq!(
        // SAFETY: a valid address of `len` bytes.
        unsafe { libc::bind(fd, &st as *const _ as *const libc::sockaddr, len) },
        0
    );
    raw_connect(fd, node(port)).unwrap();
    // SAFETY: the socket created above, owned by the stream from here on.
    let mut s = unsafe { <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    echo(&mut s, b"bound");
    let local = s.local_addr().unwrap();
    assert_eq!(local.ip().to_string(), "127.0.0.3");
    assert_eq!(
        seen(port),
        Some(local),
        "the agent carries the bound source"
    );
}

#[test]
fn ipv6_sockets_go_through_the_agent_too() {
    setup();
    let port = echo_server();
    // A dual-stack socket to a v4-mapped node address.
    let mapped: SocketAddr = format!("[::ffff:{NODE}]:{port}").parse().unwrap();
    let mut s = TcpStream::connect(mapped).expect("v4-mapped through the agent");
    echo(&mut s, b"mapped");
    assert_eq!(s.peer_addr().unwrap(), mapped);
    // A native IPv6 node address, where this host has ::1.
    if TcpListener::bind("[::1]:0").is_ok() {
        let port = echo_server();
        let v6: SocketAddr = format!("[2001:2::ff]:{port}").parse().unwrap();
        let mut s = TcpStream::connect(v6).expect("IPv6 through the agent");
        echo(&mut s, b"v6");
        assert_eq!(s.peer_addr().unwrap(), v6);
    } else {
        throttle_testkit::skip(
            "its native IPv6 part",
            "::1 on this host",
            throttle_testkit::REQUIRE_NETNS,
        );
    }
}

#[test]
fn other_destinations_are_left_alone() {
    setup();
    let port = echo_server();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    echo(&mut s, b"direct");
    assert_eq!(
        s.peer_addr().unwrap().to_string(),
        format!("127.0.0.1:{port}")
    );
    assert_eq!(seen(port), None, "the agent never saw it");
    // An agent's own port on a node, and a system port, are not intercepted either (the
    // connect fails or hangs as it would directly: 198.18.255.1 does not exist).
    let list = crate::agent::nodes().unwrap();
    assert!(!list.intercepts(node(7601)) && !list.intercepts(node(22)));
}

#[test]
fn an_accepted_delivery_reports_the_original_source() {
    setup();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let src: SocketAddr = "198.18.255.7:4242".parse().unwrap();
    // What the agent does on delivery: connect from this node's address (127.0.0.2 here)
    // and remember which source that connection stands for.
    let d = std::net::TcpStream::connect(l.local_addr().unwrap());
    drop(d);
    // SAFETY: plain socket creation.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    let (st, len) = crate::sockaddr::to_c("127.0.0.2:0".parse().unwrap());
    assert_eq!(
        // SAFETY: a valid address of `len` bytes.
        unsafe { libc::bind(sock, &st as *const _ as *const libc::sockaddr, len) },
        0
    );
    let via = crate::sockaddr::local(sock).unwrap();
    DELIVERED
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .insert(via, src);
    raw_connect(sock, l.local_addr().unwrap()).unwrap();
    // The first accept is the plain connection above: left as it is.
    let (_, plain) = l.accept().unwrap();
    assert_eq!(plain.ip().to_string(), "127.0.0.1");
    let (conn, peer) = l.accept().unwrap();
    assert_eq!(peer, src, "accept reports the original source");
    assert_eq!(conn.peer_addr().unwrap(), src, "so does getpeername");
    // SAFETY: this test's own descriptor, closed once.
    unsafe { libc::close(sock) };
}

#[test]
fn many_threads_connect_at_once() {
    setup();
    let port = echo_server();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..20 {
                    let mut s = TcpStream::connect(node(port)).unwrap();
                    echo(&mut s, format!("thread {t} connection {i}").as_bytes());
                    assert_eq!(s.peer_addr().unwrap(), node(port));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Finding: the library checked the owner of 127.0.0.1's preload port and handed IPv6
/// sockets' connections to ::1, which another user held (and read what the program sent).
/// A listener of another user at the exact address is never handed a connection.
#[test]
fn a_listener_of_another_user_is_never_handed_a_connection() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        throttle_testkit::skip(
            "a_listener_of_another_user_is_never_handed_a_connection",
            "root (to listen as another user)",
            throttle_testkit::REQUIRE_NETNS,
        );
        return;
    }
    let Ok(probe) = TcpListener::bind("[::1]:0") else {
        throttle_testkit::skip(
            "a_listener_of_another_user_is_never_handed_a_connection",
            "::1 on this host",
            throttle_testkit::REQUIRE_NETNS,
        );
        return;
    };
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let at: SocketAddr = format!("[::1]:{port}").parse().unwrap();
    let listener = throttle_testkit::user::listen_as(throttle_testkit::user::NOBODY, at)
        .expect("the other user's listener did not start");
    // SAFETY: plain socket creation.
    let fd = unsafe { libc::socket(libc::AF_INET6, libc::SOCK_STREAM, 0) };
    let started = std::time::Instant::now();
    let r = crate::agent::hand_over(fd, at, "[2001:2::ff]:5000".parse().unwrap());
    drop(listener);
    // SAFETY: the descriptor is ours.
    unsafe {
        libc::close(fd);
    }
    match r {
        crate::agent::Handover::NoAgent(why) => {
            assert!(why.contains("belongs to uid 65534"), "{why}")
        }
        crate::agent::Handover::Answered(errno) => panic!(
            "the connection was handed to uid 65534's listener (errno {errno} after {:?})",
            started.elapsed()
        ),
    }
}
