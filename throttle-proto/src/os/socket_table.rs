//! Who owns a TCP socket on this node: one socket asked of the kernel (`sock_diag`), or
//! the uid column of `/proc/net/tcp{,6}` where the kernel cannot answer that way.
//!
//! The preload port is a loopback TCP port, so neither side has peer credentials the way
//! a Unix socket has: the agent looks the client's socket up to serve only its own user's
//! programs (and delivers without a transparent socket only to its own user's listeners),
//! and the preload library checks that the listener it hands a program's socket to
//! belongs to the program's user or to root, not to another user squatting the port.
//!
//! [`connection_owner`] and [`listener_owner`] ask the kernel for the one socket
//! (`NETLINK_SOCK_DIAG`, an exact lookup: microseconds, whatever the number of sockets).
//! Reading the whole table per connection cost O(sockets) each: 3,000 idle connections
//! of one user took an agent's CPU for a minute. The table is the fallback for a kernel
//! without `inet_diag`; its parsing is here (pure), and [`read`] reads it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// TCP states as `/proc/net/tcp` prints them.
const ESTABLISHED: u8 = 0x01;
const LISTEN: u8 = 0x0A;

/// One row: local address, remote address, state, uid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Row {
    local: SocketAddr,
    remote: SocketAddr,
    state: u8,
    uid: u32,
}

/// `0100007F:1DB2` or a 32-digit IPv6 form: the kernel prints each 32-bit word of the
/// address (network byte order in memory) as a native integer.
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(
            u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16)
                .ok()?
                .to_ne_bytes(),
        )
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut o = [0u8; 16];
            for i in 0..4 {
                o[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(o))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

fn parse_row(line: &str) -> Option<Row> {
    let mut f = line.split_whitespace();
    let _slot = f.next()?;
    let local = parse_addr(f.next()?)?;
    let remote = parse_addr(f.next()?)?;
    let state = u8::from_str_radix(f.next()?, 16).ok()?;
    let _queues = f.next()?;
    let _timer = f.next()?;
    let _retransmits = f.next()?;
    let uid = f.next()?.parse().ok()?;
    Some(Row {
        local,
        remote,
        state,
        uid,
    })
}

fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

fn rows(text: &str) -> impl Iterator<Item = Row> + '_ {
    text.lines().skip(1).filter_map(parse_row)
}

/// The kernel's TCP socket tables, IPv4 and IPv6, as one text (empty where unreadable).
pub fn read() -> String {
    let mut all = String::new();
    for path in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(t) = std::fs::read_to_string(path) {
            all.push_str(&t);
            all.push('\n');
        }
    }
    all
}

/// The owner of the established connection from `local` to `remote` (as seen from
/// `local`'s side), if there is one, in `text` (from [`read`]).
pub fn connection_owner_in(text: &str, local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    let (local, remote) = (canonical(local), canonical(remote));
    rows(text)
        .find(|r| {
            r.state == ESTABLISHED && canonical(r.local) == local && canonical(r.remote) == remote
        })
        .map(|r| r.uid)
}

/// The owner of the socket listening for connections to `dst`, if there is one (bound to
/// `dst` itself or to the wildcard address), in `text` (from [`read`]).
pub fn listener_owner_in(text: &str, dst: SocketAddr) -> Option<u32> {
    let dst = canonical(dst);
    let matches = |r: &Row| {
        let l = canonical(r.local);
        r.state == LISTEN
            && l.port() == dst.port()
            && (l.ip() == dst.ip() || l.ip().is_unspecified())
    };
    // The specific address wins over the wildcard, as the kernel chooses.
    let all: Vec<Row> = rows(text).filter(matches).collect();
    all.iter()
        .find(|r| canonical(r.local).ip() == dst.ip())
        .or(all.first())
        .map(|r| r.uid)
}

/// The owner of the established connection from `local` to `remote` (as seen from
/// `local`'s side), asked of the kernel for that one socket. A socket bound to a device
/// (`SO_BINDTODEVICE`) is not found this way: `None`, which every caller refuses.
pub fn connection_owner(local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    if !diag::works() {
        return connection_owner_in(&read(), local, remote);
    }
    match diag::lookup(local, remote, ESTABLISHED) {
        Ok(found) => found,
        Err(diag::Unavailable) => connection_owner_in(&read(), local, remote),
    }
}

/// The owner of the socket listening for connections to `dst` (bound to `dst` itself or
/// to the wildcard address; the specific address wins, as the kernel chooses), from the
/// kernel's list of listening sockets, those bound to a device included.
pub fn listener_owner(dst: SocketAddr) -> Option<u32> {
    if !diag::works() {
        return listener_owner_in(&read(), dst);
    }
    match diag::listeners(dst.ip().to_canonical().is_ipv4()) {
        Ok(all) => {
            let dst = canonical(dst);
            let rows: Vec<Row> = all
                .into_iter()
                .filter(|r| {
                    let l = canonical(r.local);
                    l.port() == dst.port() && (l.ip() == dst.ip() || l.ip().is_unspecified())
                })
                .collect();
            rows.iter()
                .find(|r| canonical(r.local).ip() == dst.ip())
                .or(rows.first())
                .map(|r| r.uid)
        }
        Err(diag::Unavailable) => listener_owner_in(&read(), dst),
    }
}

/// The addresses and owners of the IPv4 sockets listening at `port`, and of the IPv6 ones
/// that may take IPv4 connections there (v4-mapped addresses in their IPv4 form).
pub fn listeners_at(port: u16) -> Vec<(SocketAddr, u32)> {
    let at_port = |r: &Row| r.state == LISTEN && r.local.port() == port;
    let rows: Vec<Row> = match diag::works().then(|| diag::listeners(true)) {
        Some(Ok(all)) => all.into_iter().filter(at_port).collect(),
        _ => rows(&read()).filter(at_port).collect(),
    };
    rows.into_iter()
        .map(|r| (canonical(r.local), r.uid))
        .collect()
}

/// The kernel's socket lookup over netlink (`sock_diag(7)`): a request without
/// `NLM_F_DUMP` names one socket by its four-tuple and gets back that socket alone; a
/// dump of the listening sockets lists them all (a few, whatever the connections).
mod diag {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::OnceLock;

    use super::{Row, LISTEN};

    /// The kernel cannot answer this way (no `inet_diag`, netlink refused): read the
    /// table instead.
    #[derive(Debug)]
    pub struct Unavailable;

    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_DUMP: u16 = 0x300;
    const NLMSG_ERROR: u16 = 2;
    const NLMSG_DONE: u16 = 3;
    const NLMSG_HDR: usize = 16;
    /// `struct inet_diag_sockid`: ports, two 16-byte addresses, interface, cookie.
    const SOCKID: usize = 48;
    /// `struct inet_diag_msg` up to and including `idiag_uid`.
    const MSG_UID_END: usize = 4 + SOCKID + 12 + 4;

    /// Whether this kernel answers socket lookups (checked once per process on a
    /// listener of its own: a kernel without `tcp_diag` answers "no such socket" to
    /// every lookup, which must not be taken for the truth).
    pub fn works() -> bool {
        static WORKS: OnceLock<bool> = OnceLock::new();
        *WORKS.get_or_init(|| {
            let Ok(l) = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)) else {
                return false;
            };
            let Ok(at) = l.local_addr() else {
                return false;
            };
            matches!(lookup(at, SocketAddr::new(at.ip(), 0), LISTEN), Ok(Some(_)))
        })
    }

    fn bytes(ip: IpAddr) -> [u8; 16] {
        let mut b = [0u8; 16];
        match ip {
            IpAddr::V4(v4) => b[..4].copy_from_slice(&v4.octets()),
            IpAddr::V6(v6) => b = v6.octets(),
        }
        b
    }

    /// The addresses as the kernel's lookup takes them: both of one family, an IPv4
    /// address in the first word (also for a v4-mapped IPv6 one: IPv4 sockets and dual-stack
    /// sockets on IPv4 addresses are all in the IPv4 lookup).
    fn family_and_words(local: IpAddr, remote: IpAddr) -> Option<(u8, [u8; 16], [u8; 16])> {
        match (local.to_canonical(), remote.to_canonical()) {
            (l @ IpAddr::V4(_), r @ IpAddr::V4(_)) => {
                Some((libc::AF_INET as u8, bytes(l), bytes(r)))
            }
            (l @ IpAddr::V6(_), r @ IpAddr::V6(_)) => {
                Some((libc::AF_INET6 as u8, bytes(l), bytes(r)))
            }
            _ => None,
        }
    }

    /// A `SOCK_DIAG_BY_FAMILY` request: header, `struct inet_diag_req_v2`.
    fn request(
        flags: u16,
        family: u8,
        states: u32,
        ports: (u16, u16),
        addrs: ([u8; 16], [u8; 16]),
    ) -> Vec<u8> {
        let len = (NLMSG_HDR + 8 + SOCKID) as u32;
        let mut m = Vec::with_capacity(len as usize);
        m.extend_from_slice(&len.to_ne_bytes());
        m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m.extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
        m.extend_from_slice(&1u32.to_ne_bytes()); // sequence
        m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
        m.push(family);
        m.push(libc::IPPROTO_TCP as u8);
        m.push(0); // no extensions
        m.push(0);
        m.extend_from_slice(&states.to_ne_bytes());
        m.extend_from_slice(&ports.0.to_be_bytes());
        m.extend_from_slice(&ports.1.to_be_bytes());
        m.extend_from_slice(&addrs.0);
        m.extend_from_slice(&addrs.1);
        m.extend_from_slice(&0u32.to_ne_bytes()); // any interface
        m.extend_from_slice(&u32::MAX.to_ne_bytes()); // INET_DIAG_NOCOOKIE
        m.extend_from_slice(&u32::MAX.to_ne_bytes());
        m
    }

    fn word(b: &[u8], at: usize) -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
    }

    /// One `inet_diag_msg` (after its netlink header): local address, state, owner.
    fn message(family: u8, m: &[u8]) -> Option<Row> {
        if m.len() < MSG_UID_END {
            return None;
        }
        let port = u16::from_be_bytes([m[4], m[5]]);
        let rport = u16::from_be_bytes([m[6], m[7]]);
        let addr = |at: usize| -> Option<IpAddr> {
            Some(if family == libc::AF_INET as u8 {
                IpAddr::V4(Ipv4Addr::from(
                    <[u8; 4]>::try_from(m.get(at..at + 4)?).ok()?,
                ))
            } else {
                IpAddr::V6(Ipv6Addr::from(
                    <[u8; 16]>::try_from(m.get(at..at + 16)?).ok()?,
                ))
            })
        };
        Some(Row {
            local: SocketAddr::new(addr(8)?, port),
            remote: SocketAddr::new(addr(24)?, rport),
            state: m[1],
            uid: word(m, MSG_UID_END - 4)?,
        })
    }

    /// The owner in a reply, if it names a socket in `state`; `Ok(None)` for "no such
    /// socket", `Err` for an answer that says the kernel cannot look sockets up this way.
    pub(super) fn parse(reply: &[u8], state: u8) -> Result<Option<u32>, Unavailable> {
        let kind = reply
            .get(4..6)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
            .ok_or(Unavailable)?;
        if kind == NLMSG_ERROR {
            let errno = -(word(reply, NLMSG_HDR).ok_or(Unavailable)? as i32);
            return match errno {
                libc::ENOENT => Ok(None),
                _ => Err(Unavailable),
            };
        }
        if kind != SOCK_DIAG_BY_FAMILY || reply.len() < NLMSG_HDR + MSG_UID_END {
            return Err(Unavailable);
        }
        let found_state = reply[NLMSG_HDR + 1];
        let uid = word(reply, NLMSG_HDR + MSG_UID_END - 4).ok_or(Unavailable)?;
        Ok((found_state == state).then_some(uid))
    }

    /// A netlink socket to the kernel's socket diagnostics, with a 1 s receive limit.
    fn open() -> Result<OwnedFd, Unavailable> {
        // SAFETY: plain system calls; the descriptor is owned from here on.
        unsafe {
            let fd = libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            );
            if fd < 0 {
                return Err(Unavailable);
            }
            let fd = OwnedFd::from_raw_fd(fd);
            let limit = libc::timeval {
                tv_sec: 1,
                tv_usec: 0,
            };
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&limit as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            );
            Ok(fd)
        }
    }

    fn send(fd: &OwnedFd, req: &[u8]) -> Result<(), Unavailable> {
        // SAFETY: a zeroed sockaddr_nl with its family set (the kernel), and a buffer of
        // the length passed.
        let sent = unsafe {
            let mut kernel: libc::sockaddr_nl = std::mem::zeroed();
            kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
            libc::sendto(
                fd.as_raw_fd(),
                req.as_ptr().cast(),
                req.len(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent == req.len() as isize {
            Ok(())
        } else {
            Err(Unavailable)
        }
    }

    fn recv(fd: &OwnedFd, buf: &mut [u8]) -> Result<usize, Unavailable> {
        loop {
            // SAFETY: a buffer of the length passed.
            let got = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if got > 0 {
                return Ok(got as usize);
            }
            if got < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(Unavailable);
        }
    }

    /// Ask the kernel for the socket bound to `local` with remote end `remote`; its owner
    /// when it is in `state`.
    pub fn lookup(
        local: SocketAddr,
        remote: SocketAddr,
        state: u8,
    ) -> Result<Option<u32>, Unavailable> {
        let Some((family, src, dst)) = family_and_words(local.ip(), remote.ip()) else {
            return Ok(None);
        };
        let fd = open()?;
        send(
            &fd,
            &request(
                0,
                family,
                u32::MAX,
                (local.port(), remote.port()),
                (src, dst),
            ),
        )?;
        let mut buf = [0u8; 1024];
        let got = recv(&fd, &mut buf)?;
        parse(&buf[..got], state)
    }

    /// Every listening TCP socket that could take an IPv4 connection (`v4`: the IPv4
    /// ones and the IPv6 ones, which may be dual-stack) or an IPv6 one.
    pub fn listeners(v4: bool) -> Result<Vec<Row>, Unavailable> {
        let mut out = Vec::new();
        let families: &[u8] = if v4 {
            &[libc::AF_INET as u8, libc::AF_INET6 as u8]
        } else {
            &[libc::AF_INET6 as u8]
        };
        for &family in families {
            let fd = open()?;
            send(
                &fd,
                &request(NLM_F_DUMP, family, 1 << LISTEN, (0, 0), ([0; 16], [0; 16])),
            )?;
            let mut buf = vec![0u8; 32 * 1024];
            'replies: loop {
                let got = recv(&fd, &mut buf)?;
                let mut at = 0;
                while at + NLMSG_HDR <= got {
                    let len = word(&buf, at).ok_or(Unavailable)? as usize;
                    let kind = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
                    if len < NLMSG_HDR || at + len > got {
                        return Err(Unavailable);
                    }
                    match kind {
                        NLMSG_DONE => break 'replies,
                        NLMSG_ERROR => return Err(Unavailable),
                        SOCK_DIAG_BY_FAMILY => {
                            if let Some(r) = message(family, &buf[at + NLMSG_HDR..at + len]) {
                                if r.state == LISTEN {
                                    out.push(r);
                                }
                            }
                        }
                        _ => {}
                    }
                    // Messages are 4-byte aligned.
                    at += (len + 3) & !3;
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Read on this machine (x86_64): a listener on 198.18.77.1:5000 and one on
    // 127.0.0.1:7602, each with one connection, uid 0 and 1000.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 014D12C6:1388 00000000:0000 0A 00000000:00000001 00:00000000 00000000  1000        0 8528748 2 000000005c401f86 100 0 0 10 0
   1: 0100007F:1DB2 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 8528745 1 00000000daff4f6d 100 0 0 10 0
   4: 014D12C6:D113 0100007F:1DB2 01 00000000:00000000 00:00000000 00000000  1000        0 8528746 2 000000004cbf64e8 20 0 0 10 -1
   5: 0100007F:1DB2 014D12C6:D113 01 00000000:00000000 00:00000000 00000000     0        0 8528747 1 00000000a80cc5c7 20 0 0 10 -1
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1389 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   1001        0 93 1 0 100 0 0 10 0
";

    #[test]
    fn owners_are_read_from_the_kernel_tables() {
        assert_eq!(
            connection_owner_in(
                TCP,
                "198.18.77.1:53523".parse().unwrap(),
                "127.0.0.1:7602".parse().unwrap()
            ),
            Some(1000)
        );
        assert_eq!(
            connection_owner_in(
                TCP,
                "198.18.77.1:53524".parse().unwrap(),
                "127.0.0.1:7602".parse().unwrap()
            ),
            None,
            "another port is another socket"
        );
        assert_eq!(
            listener_owner_in(TCP, "198.18.77.1:5000".parse().unwrap()),
            Some(1000)
        );
        assert_eq!(
            listener_owner_in(TCP, "198.18.77.2:5000".parse().unwrap()),
            None,
            "a listener on another address does not take it"
        );
        // A dual-stack wildcard listener in tcp6 takes IPv4 connections too.
        let both = format!("{TCP}\n{TCP6}");
        assert_eq!(
            listener_owner_in(&both, "198.18.77.1:5001".parse().unwrap()),
            Some(1001)
        );
        assert_eq!(parse_addr("0100007F:zz"), None);
        assert_eq!(parse_row("garbage"), None);
    }

    #[test]
    fn the_kernel_names_one_socket_and_its_owner() {
        let me = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
        for any in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(l) = std::net::TcpListener::bind(any) else {
                continue; // no IPv6 here
            };
            let at = l.local_addr().unwrap();
            let c = std::net::TcpStream::connect(at).unwrap();
            let (_s, from) = l.accept().unwrap();
            assert_eq!(
                diag::lookup(from, at, ESTABLISHED).unwrap(),
                Some(me),
                "{any}: the client's socket"
            );
            assert_eq!(connection_owner(c.local_addr().unwrap(), at), Some(me));
            assert_eq!(listener_owner(at), Some(me), "{any}: the listener");
            assert_eq!(
                diag::lookup(at, SocketAddr::new(at.ip(), 0), LISTEN).unwrap(),
                Some(me),
                "{any}: the exact lookup"
            );
            let other = SocketAddr::new(at.ip(), from.port().wrapping_add(1).max(1));
            assert_eq!(diag::lookup(other, at, ESTABLISHED).unwrap(), None);
            drop(l);
            assert_eq!(
                diag::lookup(at, SocketAddr::new(at.ip(), 0), LISTEN).unwrap(),
                None,
                "{any}: a closed listener is gone"
            );
        }
        // A v4-mapped address is the IPv4 socket's.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mapped = SocketAddr::new(
            IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped()),
            l.local_addr().unwrap().port(),
        );
        assert_eq!(listener_owner(mapped), Some(me));
    }

    #[test]
    fn listeners_are_found_also_when_bound_to_a_device() {
        let me = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
        assert!(diag::works(), "this kernel answers socket lookups");
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&l);
        // SAFETY: setsockopt on a socket this test owns, with a NUL-terminated name.
        let bound = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_BINDTODEVICE,
                c"lo".as_ptr().cast(),
                3,
            )
        };
        if bound != 0 {
            eprintln!("SO_BINDTODEVICE refused here: only the plain listener is checked");
        }
        assert_eq!(listener_owner(at), Some(me), "a listener bound to lo");
        drop(l);
        assert_eq!(listener_owner(at), None);
    }

    #[test]
    fn a_diag_reply_is_read_with_care() {
        // Too short, an unknown type, an error other than "no such socket".
        assert!(diag::parse(&[0u8; 3], ESTABLISHED).is_err());
        let mut err = vec![0u8; 20];
        err[4..6].copy_from_slice(&2u16.to_ne_bytes());
        err[16..20].copy_from_slice(&(-libc::ENOENT).to_ne_bytes());
        assert_eq!(diag::parse(&err, ESTABLISHED).unwrap(), None);
        err[16..20].copy_from_slice(&(-libc::EINVAL).to_ne_bytes());
        assert!(diag::parse(&err, ESTABLISHED).is_err());
        let mut short = vec![0u8; 30];
        short[4..6].copy_from_slice(&20u16.to_ne_bytes());
        assert!(diag::parse(&short, ESTABLISHED).is_err());
    }

    #[test]
    fn this_process_owns_its_own_sockets() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        // The owner of this test's sockets: the owner of /proc/self.
        let me = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
        let t = read();
        assert_eq!(listener_owner_in(&t, l.local_addr().unwrap()), Some(me));
        assert_eq!(
            connection_owner_in(&t, c.local_addr().unwrap(), l.local_addr().unwrap()),
            Some(me)
        );
    }
}
