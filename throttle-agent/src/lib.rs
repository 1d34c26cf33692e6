//! throttle-agent: the per-node daemon that owns a node's emulated interconnect link.
//!
//! The binary (`main.rs`) only parses flags and calls [`agent::start`]; everything else
//! lives here so it can be tested in-process with real sockets.
//!
//! * [`link`]: the link model (shape, token buckets, counters): *what* may pass.
//! * [`transport`]: the proxy transport (handshake, copy loop, local endpoint, data port,
//!   forwards): *how* bytes move.
//! * [`api`]: the HTTP/JSON control API.
//! * [`jobs`]: launching and watching the ranks of a job on this node; [`programs`]: which
//!   programs may be launched.
//! * [`name`]: the one grammar for job and node names; [`limits`]: connection caps;
//!   [`private_dir`]: directories only the agent's user may enter.
//! * [`agent`]: configuration, shared state, start/stop.
//! * [`client`]: blocking helpers for programs that use the rank tunnels.

pub mod agent;
pub mod api;
pub mod auth;
pub mod client;
pub mod directory;
pub mod endpoint;
pub mod jobs;
pub mod limits;
pub mod link;
pub mod name;
pub mod private_dir;
pub mod programs;
pub mod rate;
pub mod registry;
pub mod transport;
