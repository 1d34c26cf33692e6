//! The proxy transport: how bytes get from an application on one node to one on another.
//!
//! * [`wire`]: the handshake every connection starts with.
//! * [`socket`] and [`pump`]: moving bytes (splice or buffers), paced by the link's ports.
//! * [`local`]: the local endpoint where ranks open streams and register.
//! * [`peer`]: the data port where agents hand streams to each other.
//! * [`forward`]: port forwards that carry any TCP program through the link.

pub mod forward;
pub mod local;
pub mod peer;
pub mod pump;
pub mod socket;
pub mod wire;

use std::time::Duration;

/// How long a connection may take to send its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long dialing a peer agent may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How often a client asks again when an agent answers `Busy`.
pub const BUSY_RETRIES: u32 = 30;

/// Wait before retry `attempt` (1-based) after a `Busy` answer: 2 ms doubling to 100 ms,
/// with jitter so that many clients refused together do not return together. Thirty
/// retries span about 2.5 s.
pub fn busy_backoff(attempt: u32) -> Duration {
    let base = (2u64 << attempt.min(6)).min(100);
    let mut j = [0u8; 1];
    let _ = getrandom::getrandom(&mut j);
    Duration::from_millis(base / 2 + (base / 2) * j[0] as u64 / 255)
}
