//! throttle-proto: the vocabulary the agent, the controller and the workloads share.
//!
//! Every value that crosses a process boundary is defined here once, with its parsing,
//! validation and serde, and travels as its type: a bandwidth setting is a [`Pct`], a
//! link speed a [`Rate`], a job or node a [`Name`]. Nothing here does I/O but [`os`], and
//! nothing depends on tokio or axum.
//!
//! * values: [`rate`], [`pct`], [`name`], [`shape`], [`cpus`];
//! * the transport's handshake: [`wire`] (sans-IO), [`auth`] (token and proofs),
//!   [`flows`] (what kernel-paced agents tell each other),
//!   [`preload`] (the preload library's requests to its node's agent);
//! * [`os`]: the only I/O: the token file, [`os::rank_client`] (blocking helpers for ranks
//!   and probes), [`os::socket_table`] (socket owners, for both ends of the preload port);
//! * the control API's bodies: [`status`], [`cluster`], [`job`], [`forward`],
//!   [`calibration`], [`refusal`];
//! * what a workload is: [`workload`] (each program's options, checked, as arguments and
//!   as stored), and what workloads report: [`result`].

pub mod auth;
pub mod calibration;
pub mod cluster;
pub mod cpus;
pub mod durations;
pub mod emulation;
pub mod flows;
pub mod forward;
pub mod job;
pub mod name;
#[cfg(feature = "os")]
pub mod os;
pub mod pacing;
pub mod pct;
pub mod preload;
pub mod rate;
pub mod refusal;
pub mod result;
pub mod shape;
pub mod status;
pub mod wire;
pub mod workload;

pub use durations::{Lease, TimeLimit};
pub use name::Name;
pub use pct::Pct;
pub use rate::Rate;
pub use shape::{Shape, ShapeChange};
