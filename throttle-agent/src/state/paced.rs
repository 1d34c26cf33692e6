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
    /// The node's paced traffic against its link, both ways.
    pub conformance: Mutex<Conformance>,
    /// The device queue paced sockets are put into (`--egress-device`).
    pub egress_queue: Option<crate::transport::egress_queue::EgressQueue>,
}

/// Whether a node's kernel-paced traffic stayed within its link: what the sockets sent
/// (acknowledged) and received between two reads, held to a token bucket of the link's
/// rate. The bucket holds [`Conformance::DEPTH_PER_SOCKET`] per paced socket (one segment
/// burst each: the counts move in whole bursts), filled by that much when a socket is
/// added, and what the link carries in [`Conformance::DEPTH_TIME`] (the reads' own
/// jitter); traffic beyond it is counted. What is counted is real: a link never carries
/// more, and the kernel does where it does not pace (a connection's first ten segments,
/// each up to 64 KiB on loopback) or lets bursts through.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conformance {
    at: Option<Instant>,
    /// Tokens left in each direction's bucket, in bytes.
    sent_tokens: f64,
    received_tokens: f64,
    /// Sockets paced at the last read: each new one brings its burst's worth of tokens.
    sockets: usize,
    pub beyond_sent: u64,
    pub beyond_received: u64,
}

impl Conformance {
    pub const DEPTH_PER_SOCKET: f64 = 64.0 * 1024.0;
    pub const DEPTH_TIME: std::time::Duration = std::time::Duration::from_millis(20);

    /// Account for `sent` and `received` bytes since the last read, at `now`, on a link of
    /// `rate` bytes per second (`None`: unlimited) with `sockets` paced sockets.
    pub fn account(
        &mut self,
        now: Instant,
        rate: Option<f64>,
        sockets: usize,
        sent: u64,
        received: u64,
    ) {
        let Some(rate) = rate else {
            self.at = Some(now);
            self.sent_tokens = f64::INFINITY;
            self.received_tokens = f64::INFINITY;
            return;
        };
        let depth =
            Self::DEPTH_PER_SOCKET * sockets.max(1) as f64 + rate * Self::DEPTH_TIME.as_secs_f64();
        let new_sockets = sockets.saturating_sub(self.sockets) as f64;
        self.sockets = sockets;
        let earned = self.at.map_or(depth, |t| {
            rate * now.saturating_duration_since(t).as_secs_f64()
        }) + Self::DEPTH_PER_SOCKET * new_sockets;
        self.at = Some(now);
        for (tokens, bytes, beyond) in [
            (&mut self.sent_tokens, sent, &mut self.beyond_sent),
            (
                &mut self.received_tokens,
                received,
                &mut self.beyond_received,
            ),
        ] {
            let left = (*tokens + earned).min(depth) - bytes as f64;
            if left < 0.0 {
                *beyond = beyond.saturating_add((-left) as u64);
            }
            *tokens = left.max(0.0);
        }
    }
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
    /// Bytes acknowledged (sent) and received on every socket paced since the start, and
    /// of those the bytes beyond the link ([`Conformance`]).
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub beyond_sent: u64,
    pub beyond_received: u64,
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

    /// Another node's row, as it came at `now`. A row sent again unchanged (every
    /// `REFRESH`) only keeps it fresh: counted as a change, the seven rows of an 8-node
    /// cluster kept every agent at its fast read interval for good (decision 0050,
    /// "Agents' CPU", measured with the refresh and the idle wait changed together).
    pub fn note_row(&self, from: &Name, row: FlowRow, now: Instant) {
        let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        let same = rows.get(from).is_some_and(|(_, old)| *old == row);
        rows.insert(from.clone(), (now, row));
        drop(rows);
        if !same {
            self.generation.fetch_add(1, Ordering::Relaxed);
            self.changed.notify_one();
        }
    }

    /// The stream that sent `from`'s row at `at` (its last) closed: the row no longer
    /// counts, unless a newer stream of that node's has sent one since.
    pub fn drop_row(&self, from: &Name, at: Instant) {
        let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        if rows.get(from).is_some_and(|(t, _)| *t == at) {
            rows.remove(from);
            drop(rows);
            self.generation.fetch_add(1, Ordering::Relaxed);
            self.changed.notify_one();
        }
    }

    pub fn paced_now(&self) -> usize {
        self.sockets.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn counts(&self) -> PacingCounts {
        let sockets = self.sockets.lock().unwrap_or_else(|e| e.into_inner());
        let open: u64 = sockets.iter().map(|s| s.counters.bytes_acked).sum();
        let received: u64 = sockets.iter().map(|s| s.counters.bytes_received).sum();
        let conformance = self
            .conformance
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        PacingCounts {
            beyond_sent: conformance.beyond_sent,
            beyond_received: conformance.beyond_received,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn traffic_within_the_link_is_not_beyond_it_and_a_flood_of_escaped_messages_is() {
        const MS: Duration = Duration::from_millis(1);
        // 450 kB/s (3% of 120 Mbit/s), 3 sockets: the bucket holds 192 KiB + 9 kB.
        let rate = Some(450_000.0);
        let t0 = Instant::now();
        // A stream at the rate, read every 20 ms, its counts moving in 64 KiB bursts.
        let mut c = Conformance::default();
        c.account(t0, rate, 3, 0, 0);
        let mut sent = 0u64;
        for i in 1..=500u32 {
            let due = (450_000.0 * 0.02 * f64::from(i)) as u64;
            let now_at = due / 65_536 * 65_536;
            c.account(t0 + 20 * MS * i, rate, 3, now_at - sent, now_at - sent);
            sent = now_at;
        }
        assert_eq!((c.beyond_sent, c.beyond_received), (0, 0), "{c:?}");
        // The stand-in's exchange at 4 procs: 64 KiB per iteration every 20 ms, 10
        // iterations, as the kernel lets it go (each message one burst, unpaced).
        let mut c = Conformance::default();
        c.account(t0, rate, 3, 0, 0);
        for i in 1..=10u32 {
            c.account(t0 + 20 * MS * i, rate, 3, 65_536, 0);
        }
        // 655 kB sent where the link carried 90 kB in the time, and the bucket 206 kB.
        assert!(
            (350_000..370_000).contains(&c.beyond_sent),
            "{}",
            c.beyond_sent
        );
        assert_eq!(c.beyond_received, 0);
        // An unlimited link: nothing is beyond it, and a limit set later starts full.
        let mut c = Conformance::default();
        c.account(t0, None, 3, 1 << 30, 1 << 30);
        c.account(t0 + MS, rate, 3, 100_000, 0);
        assert_eq!(c.beyond_sent, 0);
    }

    fn row(flows: u32) -> FlowRow {
        FlowRow {
            egress: 1000,
            ingress: 1000,
            flows: vec![(Name::parse("node", "n0").unwrap(), flows)],
        }
    }

    #[test]
    fn a_row_sent_again_unchanged_is_no_change_and_a_closed_stream_takes_its_row() {
        let p = Pacing::default();
        let n1 = Name::parse("node", "n1").unwrap();
        let t0 = Instant::now();
        p.note_row(&n1, row(1), t0);
        assert_eq!(p.generation.load(Ordering::Relaxed), 1);
        let t1 = t0 + Duration::from_millis(2000);
        p.note_row(&n1, row(1), t1);
        assert_eq!(
            p.generation.load(Ordering::Relaxed),
            1,
            "the same row again only keeps it fresh"
        );
        assert_eq!(p.rows.lock().unwrap()[&n1].0, t1, "and it is fresh");
        p.note_row(&n1, row(2), t1);
        assert_eq!(p.generation.load(Ordering::Relaxed), 2);
        // An older stream's end leaves the row a newer stream sent.
        p.drop_row(&n1, t0);
        assert!(p.rows.lock().unwrap().contains_key(&n1));
        assert_eq!(p.generation.load(Ordering::Relaxed), 2);
        p.drop_row(&n1, t1);
        assert!(!p.rows.lock().unwrap().contains_key(&n1));
        assert_eq!(p.generation.load(Ordering::Relaxed), 3);
    }
}
