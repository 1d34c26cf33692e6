//! The agent's services over the byte engine (`crate::transport`) and the shared state:
//!
//! * [`rank_endpoint`]: the local endpoint (Unix socket) where ranks open streams and
//!   register; [`delivery`]: handing a stream to a rank on this node.
//! * [`peer`]: the data port where agents hand streams to each other (the dispatcher into
//!   delivery, forwards' targets and interception); [`calibration`]: measuring what a
//!   link carries.
//! * [`forward`]: port forwards that carry any TCP program through the link (the rules
//!   held are `crate::state::forwards`); [`target`]: which addresses of this node a stream
//!   may reach.
//! * [`pacing`]: kernel-paced links: the program's own sockets registered, paced at their
//!   share of the links, their shares agreed with the other agents.
//!
//! The dispatcher ([`peer`]) is above everything it dispatches to, interception's
//! receiving side included; every sender dials through `crate::dial`, below this and
//! interception.

pub mod calibration;
pub mod delivery;
pub mod forward;
pub mod pacing;
pub mod peer;
pub mod rank_endpoint;
pub mod target;
