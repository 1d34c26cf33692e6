//! The only part of this crate that touches the operating system: a token file read,
//! Unix sockets a rank opens to its agent ([`rank_client`]), and the kernel's tables of
//! socket owners ([`socket_table`]: `sock_diag` over netlink, `/proc/net/tcp` where the
//! kernel cannot answer). Everything else in the crate is values, their parsing and their
//! wire formats, and does no I/O (`tests/tests/structure/architecture.rs` checks it).

pub mod memory;
pub mod rank_client;
pub mod socket_table;
pub mod token_file;
