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
