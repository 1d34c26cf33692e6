//! throttle-agent: the per-node daemon that owns a node's emulated interconnect link.
//!
//! The binary (`main.rs`) only parses flags and calls [`agent::start`]; everything else
//! lives here so it can be tested in-process with real sockets.
//!
//! * [`link`]: the link model (shape, pacers, counters): *what* may pass, and when; its
//!   shape changes only through [`link::LeasedLink`] (a run's shape holds only while its
//!   controller renews it). [`lease`]: a lease's term, the one account of every lease a
//!   controller holds here (a job's, a shape's).
//! * [`transport`]: the byte engine (handshake, copy loop, sockets, socket options,
//!   timers): *how* bytes move; [`dial`]: dialling another node's agent and carrying a
//!   connection over the stream; [`services`]: what the agent does with streams over them
//!   and the state (the local endpoint, the data port, delivery, forwards, calibration).
//! * [`api`]: the HTTP/JSON control API.
//! * [`launch`]: launching and watching the ranks of a job on this node, which programs
//!   may be launched, the one thread ranks are forked from (so they die with the agent and
//!   only then), CPU placement and priority, private directories.
//! * [`directory`] and [`registry`]: the cluster's nodes and jobs, the ranks registered
//!   here; [`endpoint`]: where a rank accepts streams.
//! * [`intercept`]: transparent interception of unmodified programs' connections
//!   (nftables redirect, transparent sockets).
//! * [`limits`]: connection caps.
//! * [`state`]: the state every service shares; [`serve`]: the one accept loop every
//!   listener runs; [`shutdown`]: the stop signal;
//!   [`agent`]: configuration and start/stop; [`config_file`]: the TOML file the flags
//!   can also come from; [`notify`]: systemd readiness.
//!
//! The vocabulary (rates, percentages, names, the handshake, the API's bodies) is
//! `throttle_proto`, shared with the controller and the workloads.

pub mod agent;
pub mod api;
pub mod config_file;
pub mod dial;
pub mod directory;
pub mod endpoint;
pub mod intercept;
pub mod launch;
pub mod lease;
pub mod limits;
pub mod link;
pub mod notify;
pub mod registry;
pub mod serve;
pub mod services;
pub mod shutdown;
pub mod state;
pub mod transport;
