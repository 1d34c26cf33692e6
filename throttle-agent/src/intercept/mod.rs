//! Transparent interception: unmodified programs' TCP connections to other nodes go
//! through the agents, with no forward rule and no change to the program.
//!
//! On the sending node the kernel redirects a program's connection to another node's
//! address into the agent ([`netfilter`]: nftables, `redirect` in the output hook); the
//! agent reads where it was going (SO_ORIGINAL_DST) and from where, and hands it to the
//! destination node's agent as `PeerWant::Intercepted` on the data port (authenticated
//! like every peer stream). The receiving agent checks that the source is the dialing
//! node's own address and the destination its own, then connects to the destination
//! *from the original source address and port* with a transparent socket, so the program
//! there sees its real peer (Open MPI's TCP BTL drops connections from unexpected
//! addresses). Both agents' links shape the stream: egress on the sender, ingress on the
//! receiver, like rank streams.
//!
//! Without root the same path is fed from user space ([`preload`]): the preload library
//! in the program hands its socket to the agent's preload port on loopback with the
//! destination, and the receiving agent, unable to use a transparent socket, connects from
//! its own address and tells the library in the receiving program the original source
//! (which its `accept()` and `getpeername()` then report).
//!
//! The modules, sending side first:
//! * [`redirect`]: the interception port, where the kernel redirect sends programs'
//!   connections; [`preload`]: the preload port, where the preload library hands them
//!   over. Both are fed into [`outgoing::open`], the one entry for an intercepted
//!   connection on the sending side.
//! * [`incoming`]: the receiving side, [`incoming::deliver`] (the data port's dispatcher
//!   calls it).
//! * [`rules`]: the redirect written from the directory and interception's state (plain
//!   data the agent's state holds: `crate::state::interception`); [`members`]: which
//!   directory entries may be captured (nodes whose agents proved the token at their
//!   address); [`netfilter`]: the kernel rules. The socket options tokio does not wrap are
//!   `crate::transport::sockopt`.
//!
//! Interception sends through `crate::dial`, like every sender; the data port's
//! dispatcher (`crate::services::peer`) calls its receiving side: the services stand
//! above it.
//!
//! The agent's own sockets to other agents carry a mark the redirect skips.

pub mod incoming;
pub mod members;
pub mod netfilter;
pub mod outgoing;
pub mod preload;
pub mod redirect;
pub mod rules;

/// Lowest destination port interception carries: system services (ssh, NFS, anything a
/// firewall guards on the node's address) are neither redirected nor delivered.
pub const FIRST_PORT: u16 = 1024;
