//! Kernel-paced links' part of the agent's state, as plain data: the program sockets this
//! agent paces (each named by its process and descriptor, never held open), every other
//! node's flows as its agent last told them, and the counters a run's proof reads. The
//! service that fills it is `services::pacing`.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use throttle_proto::flows::FlowRow;
use throttle_proto::name::Name;
use throttle_proto::preload::PaceSide;

use crate::transport::kernel::TcpCounters;

/// One program socket this agent paces.
pub struct PacedSocket {
    /// The process that registered it (the descriptor number is that process's): one
    /// pidfd per process, shared by its sockets, where pidfds tell processes apart.
    pub process: Arc<OwnedFd>,
    pub process_key: u64,
    pub pid: i32,
    pub fd: i32,
    /// The socket's inode: a descriptor number the program reused for another socket is
    /// not this one.
    pub inode: u64,
    /// The node at the other end, and its address as the registration named it: checked
    /// against the socket's real peer once it is connected (`checked`).
    pub peer: Name,
    pub peer_ip: std::net::IpAddr,
    pub checked: bool,
    pub side: PaceSide,
    /// The registering process's user.
    pub uid: u32,
    /// The rate last set (`None`: unlimited), and whether one was set at all.
    pub rate: Option<Option<u64>>,
    /// The counters as last read, and when the socket last had data on its way.
    pub counters: TcpCounters,
    pub last_active: Option<Instant>,
}

/// What the pacing service shares with the rest of the agent.
#[derive(Default)]
pub struct Pacing {
    pub sockets: Mutex<Vec<PacedSocket>>,
    /// Every other node's row, with when it came.
    pub rows: Mutex<HashMap<Name, (Instant, FlowRow)>>,
    /// A socket was registered or a row came: compute the shares again now.
    pub changed: tokio::sync::Notify,
    /// Counts what the shares depend on besides this node's row: registrations, sockets
    /// forgotten, rows that came. Unchanged, with this node's row unchanged, a pass sets
    /// nothing.
    pub generation: AtomicU64,
    /// Sockets registered since the start.
    pub registered: AtomicU64,
    /// Registrations refused (the socket could not be taken or paced).
    pub refused: AtomicU64,
    /// Sockets that could no longer be read or paced while their program still held
    /// them (their last rate stayed).
    pub lost: AtomicU64,
    /// Accepted sockets that could not be paced: they send unpaced (a connecting one the
    /// agent refuses is carried by the agent instead).
    pub unpaced: AtomicU64,
    /// Each destination node's rate as last computed (`None`: unlimited).
    pub rates: Mutex<HashMap<Name, Option<u64>>>,
    /// Bytes acknowledged and received on sockets no longer paced (closed), and rate
    /// changes made.
    pub closed_bytes: AtomicU64,
    pub closed_received: AtomicU64,
    pub rate_changes: AtomicU64,
}

impl std::fmt::Debug for Pacing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pacing")
            .field("sockets", &self.paced_now())
            .field("registered", &self.registered.load(Ordering::Relaxed))
            .field("refused", &self.refused.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A snapshot for `status` and a run's proof.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacingCounts {
    pub paced_now: u64,
    pub registered: u64,
    pub refused: u64,
    pub lost: u64,
    pub unpaced: u64,
    /// Bytes acknowledged (sent) and received on every socket paced since the start.
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub rate_changes: u64,
    /// Microseconds paced sockets were limited by their peer's receive window, and by
    /// their own send buffer (sockets open now).
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
}

impl Pacing {
    /// Count a socket no longer paced: its bytes stay in the totals, and the shares are
    /// computed again.
    pub fn forget(&self, s: &PacedSocket) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.closed_bytes
            .fetch_add(s.counters.bytes_acked, Ordering::Relaxed);
        self.closed_received
            .fetch_add(s.counters.bytes_received, Ordering::Relaxed);
    }

    pub fn paced_now(&self) -> usize {
        self.sockets.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn counts(&self) -> PacingCounts {
        let sockets = self.sockets.lock().unwrap_or_else(|e| e.into_inner());
        let open: u64 = sockets.iter().map(|s| s.counters.bytes_acked).sum();
        let received: u64 = sockets.iter().map(|s| s.counters.bytes_received).sum();
        PacingCounts {
            paced_now: sockets.len() as u64,
            registered: self.registered.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
            unpaced: self.unpaced.load(Ordering::Relaxed),
            bytes_acked: open + self.closed_bytes.load(Ordering::Relaxed),
            bytes_received: received + self.closed_received.load(Ordering::Relaxed),
            rate_changes: self.rate_changes.load(Ordering::Relaxed),
            rwnd_limited_us: sockets.iter().map(|s| s.counters.rwnd_limited_us).sum(),
            sndbuf_limited_us: sockets.iter().map(|s| s.counters.sndbuf_limited_us).sum(),
        }
    }
}
