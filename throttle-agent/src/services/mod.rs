//! The agent's services over the byte engine (`crate::transport`) and the shared state:
//!
//! * [`rank_endpoint`]: the local endpoint (Unix socket) where ranks open streams and
//!   register; [`delivery`]: handing a stream to a rank on this node.
//! * [`dial`]: dialling another node's agent and carrying a connection over the stream;
//!   [`peer`]: the data port where agents hand streams to each other (the dispatcher into
//!   delivery, forwards' targets and interception); [`calibration`]: measuring what a
//!   link carries.
//! * [`forward`]: port forwards that carry any TCP program through the link; [`forwards`]:
//!   the rules held; [`target`]: which addresses of this node a stream may reach.
//!
//! The dispatcher ([`peer`]) is above everything it dispatches to; [`dial`] is below every
//! sender.

pub mod calibration;
pub mod delivery;
pub mod dial;
pub mod forward;
pub mod forwards;
pub mod peer;
pub mod rank_endpoint;
pub mod target;
