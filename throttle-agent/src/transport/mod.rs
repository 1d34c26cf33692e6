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

/// How long a connection may take to send its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long dialing a peer agent may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
