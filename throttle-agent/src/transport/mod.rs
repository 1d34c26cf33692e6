//! The byte engine: how bytes move between two sockets, whatever carries them.
//!
//! * [`wire`]: the handshake every connection starts with (async readers over
//!   `throttle_proto::wire`).
//! * [`socket`] and [`pump`]: moving bytes (splice or buffers), paced by the link's ports;
//!   [`timer`]: the timerfd sleeps the pacing waits on; [`sockopt`]: the socket options
//!   tokio does not wrap (original destination, marks, transparent sockets); [`kernel`]:
//!   the calls of kernel-paced links (another process's socket paced and read);
//!   [`egress_queue`]: the device queue that holds kernel-paced sockets' bursts to the
//!   link's rate on a host of the node's own.
//! * This module: every data-path socket (segments capped, listeners with their queue) and
//!   the timeouts of a handshake.
//!
//! What the agent does with streams is above this and the state: dialling another agent
//! (`crate::dial`), interception (`crate::intercept`), the data port, delivery to a rank,
//! forwards and calibration (`crate::services`).

pub mod egress_queue;
pub mod kernel;
pub mod pump;
pub mod socket;
pub mod sockopt;
pub mod timer;
pub mod wire;

use std::time::Duration;

pub use throttle_proto::wire::{busy_backoff, BUSY_RETRIES};

/// Largest TCP segment on the agent's sockets (`TCP_MAXSEG`): that of a 9,000-byte MTU.
///
/// Loopback's MTU is 64 KiB, so a local cluster's segments were as large as the 64 KB
/// receive window of a socket the agent reads slowly (it paces its reads): a sender whose
/// next segment did not fit waited for the 200 ms persist timer, one iteration in forty
/// of a paced master/worker run (experiments/2026-11-24-segment-stall.md). A real
/// interconnect's MTU is 1,500 or 9,000 bytes, so the cap changes nothing on one; set on
/// a listener, it holds for the connections it accepts, in both directions.
pub const MAX_SEGMENT: u32 = 8960;

/// A TCP socket for `addr`'s family.
fn plain_socket(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpSocket> {
    if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
}

/// A TCP socket for `addr`'s family with segments capped at [`MAX_SEGMENT`].
pub fn tcp_socket(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpSocket> {
    let socket = plain_socket(addr)?;
    nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::TcpMaxSeg, &MAX_SEGMENT)?;
    Ok(socket)
}

/// Connect to `addr` with a [`tcp_socket`].
pub async fn connect(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
    tcp_socket(addr)?.connect(addr).await
}

/// Listen for the data paths (data port, forwards, interception): segments capped
/// ([`MAX_SEGMENT`]), and a deep accept queue: a burst of a thousand connections (a large
/// job starting, `iperf3 -P`) would overflow the usual 1,024 on a busy machine, and with
/// SYN cookies an overflowed queue ends in resets.
pub fn listen(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    bind_and_listen(tcp_socket(addr)?, addr)
}

/// Listen for the control API: its connections are never paced, so their segments are
/// what the route allows.
pub fn listen_control(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    bind_and_listen(plain_socket(addr)?, addr)
}

fn bind_and_listen(
    socket: tokio::net::TcpSocket,
    addr: std::net::SocketAddr,
) -> std::io::Result<tokio::net::TcpListener> {
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Accept queue of the agent's listeners (the kernel caps it at net.core.somaxconn).
pub const LISTEN_BACKLOG: u32 = 4096;

/// How long a connection may take to send its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a TCP connect (to a peer agent, or a forward's target) may take. Generous: a
/// burst of a thousand connections can fill a busy program's accept queue, and a SYN
/// dropped there is sent again only after 1 s and 3 s.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{getsockopt, sockopt::TcpMaxSeg};

    /// Over loopback (MTU 64 KiB) the segments would be ~64 KB without the cap; both ends
    /// of a connection are capped, whichever side set it.
    #[tokio::test]
    async fn segments_are_capped_on_loopback_in_both_directions() {
        // The agent's listener and an ordinary client (a program dialing a forward).
        let listener = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        for s in [&client, &accepted] {
            let mss = getsockopt(s, TcpMaxSeg).unwrap();
            assert!(mss <= MAX_SEGMENT, "segment size {mss}");
        }
        // The agent dialing an ordinary listener (a peer of another version, a program).
        let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dialed = connect(plain.local_addr().unwrap()).await.unwrap();
        let (theirs, _) = plain.accept().await.unwrap();
        for s in [&dialed, &theirs] {
            let mss = getsockopt(s, TcpMaxSeg).unwrap();
            assert!(mss <= MAX_SEGMENT, "segment size {mss}");
        }
    }
}
