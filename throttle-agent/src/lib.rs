//! throttle-agent: the per-node daemon that owns a node's emulated interconnect link.
//!
//! The binary (`main.rs`) only parses flags and calls [`agent::start`]; everything else
//! lives here so it can be tested in-process with real sockets.
//!
//! * [`link`]: the link model (shape, pacers, counters): *what* may pass, and when; its
//!   shape changes only through [`link::LeasedLink`] (a run's shape holds only while its
//!   controller renews it).
//! * [`transport`]: the proxy transport (handshake, copy loop, local endpoint, data port,
//!   forwards): *how* bytes move.
//! * [`api`]: the HTTP/JSON control API.
//! * [`jobs`]: launching and watching the ranks of a job on this node; [`programs`]: which
//!   programs may be launched; [`spawner`]: the one thread ranks are forked from, so they
//!   die with the agent and only then.
//! * [`directory`] and [`registry`]: the cluster's nodes and jobs, the ranks registered
//!   here; [`endpoint`]: where a rank accepts streams.
//! * [`intercept`]: transparent interception of unmodified programs' connections
//!   (nftables redirect, transparent sockets).
//! * [`limits`]: connection caps; [`private_dir`]: directories only the agent's user may
//!   enter.
//! * [`state`]: the state every service shares; [`serve`]: the one accept loop every
//!   listener runs; [`shutdown`]: the stop signal;
//!   [`agent`]: configuration and start/stop; [`config_file`]: the TOML file the flags
//!   can also come from; [`affinity`]: CPU pinning; [`notify`]: systemd readiness;
//!   [`cpu`]: how long the agent waited for a CPU.
//!
//! The vocabulary (rates, percentages, names, the handshake, the API's bodies) is
//! `throttle_proto`, shared with the controller and the workloads.

pub mod affinity;
pub mod agent;
pub mod api;
pub mod config_file;
pub mod cpu;
pub mod directory;
pub mod endpoint;
pub mod intercept;
pub mod jobs;
pub mod launchers;
pub mod limits;
pub mod link;
pub mod notify;
pub mod private_dir;
pub mod programs;
pub mod registry;
pub mod serve;
pub mod shutdown;
pub mod spawner;
pub mod state;
pub mod transport;
