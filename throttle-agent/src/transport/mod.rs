//! The proxy transport: how bytes get from an application on one node to one on another.
//!
//! * [`wire`]: the handshake every connection starts with (async readers over
//!   `throttle_proto::wire`).
//! * [`socket`] and [`pump`]: moving bytes (splice or buffers), paced by the link's ports.
//! * [`rank_endpoint`]: the local endpoint (Unix socket) where ranks open streams and
//!   register; [`delivery`]: handing a stream to a rank on this node.
//! * [`peer`]: the data port where agents hand streams to each other; [`calibration`]:
//!   measuring what a link carries.
//! * [`forward`]: port forwards that carry any TCP program through the link.

pub mod calibration;
pub mod delivery;
pub mod forward;
pub mod peer;
pub mod pump;
pub mod rank_endpoint;
pub mod socket;
pub mod wire;

use std::time::Duration;

pub use throttle_proto::wire::{busy_backoff, BUSY_RETRIES};

/// Listen with a deep accept queue: a burst of a thousand connections (a large job
/// starting, `iperf3 -P`) would overflow the usual 1,024 on a busy machine, and with SYN
/// cookies an overflowed queue ends in resets.
pub fn listen(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
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
