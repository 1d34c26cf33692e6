//! throttle-ctl: the controller. The binary parses arguments; this library does the work
//! so it can be tested and reused (e.g. by `demo`).
//!
//! * [`cluster`]: the cluster file.
//! * [`client`]: the control-API client for one agent.
//! * [`local`]: starting and stopping a local emulated cluster; [`certs`]: its TLS
//!   certificates.
//! * [`commands`]: one module per command.

pub mod analysis;
pub mod certs;
pub mod client;
pub mod cluster;
pub mod commands;
pub mod local;
pub mod report;
pub mod store;
pub mod sweep;
pub mod table;
