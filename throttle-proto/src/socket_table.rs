//! Who owns a TCP socket on this node: the uid column of `/proc/net/tcp{,6}`.
//!
//! The preload port is a loopback TCP port, so neither side has peer credentials the way
//! a Unix socket has: the agent looks the client's socket up to serve only its own user's
//! programs (and delivers without a transparent socket only to its own user's listeners),
//! and the preload library checks that the listener it hands a program's socket to
//! belongs to the program's user or to root, not to another user squatting the port.
//! The parsing is here (pure); [`read`] is the one place that reads the tables.

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
