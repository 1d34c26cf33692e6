//! Caps on what clients can make the agent hold at once.
//!
//! Without them, 20,000 idle connections (no token needed) took an agent to its file limit
//! and stalled every run. Each listener has a [`Pool`] of permits; a connection that finds
//! the pool empty is refused at once with an answer (a `Busy` handshake reply, an HTTP
//! 503), never queued. Connections still in their handshake and established streams draw
//! from separate pools, so clients that never authenticate cannot crowd out real traffic,
//! and one source address may hold only a quarter of a listener's pool, so one abusive
//! host cannot lock the controller (on another address) out. On the data port the
//! cluster's own agents (their data addresses) are exempt from that share: a large job
//! opens hundreds of streams between two nodes at once. Forward listeners' connections
//! have a pool of their own without a per-source share (one client host with a thousand
//! connections is the usual case there). Whatever a client holds is released by the
//! handshake and header timeouts.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections at once on the control API (at most).
pub const CONTROL_CONNECTIONS: usize = 64;
/// Connections at once in their handshake, per transport listener (at most).
pub const HANDSHAKES: usize = 1024;
/// Connections at once in their request on the preload port (at most). Lower than the
/// others: without root each one reads `/proc/net/tcp` to find its socket's owner.
pub const PRELOAD_HANDSHAKES: usize = 256;
/// File descriptors one stream holds on an agent: two sockets, and a pipe (two
/// descriptors) per direction for splice.
const FDS_PER_STREAM: u64 = 6;

/// Permits held per source address.
type BySource = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// One listener's permits.
#[derive(Debug)]
pub struct Pool {
    sem: Arc<Semaphore>,
    /// Extra permits only trusted clients may use (the cluster's agents on the data port,
    /// sources that recently presented the token on the control API), so that clients
    /// without the token cannot lock them out by filling the pool from many addresses.
    reserve: Arc<Semaphore>,
    size: usize,
    /// Most permits one source address may hold.
    per_source: usize,
    by_source: BySource,
}

/// Held while a connection is served; returns its place in the pool when dropped.
#[derive(Debug)]
pub struct Permit {
    _permit: OwnedSemaphorePermit,
    source: Option<(IpAddr, BySource)>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some((ip, map)) = &self.source {
            let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = m.get_mut(ip) {
                *n -= 1;
                if *n == 0 {
                    m.remove(ip);
                }
            }
        }
    }
}

/// The address a per-source share is counted against: IPv4 as is (IPv4-mapped IPv6
/// included), IPv6 by its /64, since one host usually holds a whole /64.
pub fn source_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

impl Pool {
    fn new(size: usize) -> Pool {
        let size = size.max(1);
        Pool {
            sem: Arc::new(Semaphore::new(size)),
            reserve: Arc::new(Semaphore::new((size / 4).max(1))),
            size,
            per_source: (size / 4).max(1),
            by_source: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// A permit for a trusted client: from the pool, or from the reserve when the pool is
    /// used up; no per-source share.
    pub fn try_enter_trusted(&self) -> Option<Permit> {
        let permit = self
            .sem
            .clone()
            .try_acquire_owned()
            .or_else(|_| self.reserve.clone().try_acquire_owned())
            .ok()?;
        Some(Permit {
            _permit: permit,
            source: None,
        })
    }

    /// A permit, or `None` when the pool (or this source's share of it) is used up.
    /// `source` is the client's address; `None` for Unix sockets and authenticated streams.
    pub fn try_enter(&self, source: Option<IpAddr>) -> Option<Permit> {
        let Some(ip) = source.map(source_key) else {
            return Some(Permit {
                _permit: self.sem.clone().try_acquire_owned().ok()?,
                source: None,
            });
        };
        let mut m = self.by_source.lock().unwrap_or_else(|e| e.into_inner());
        let held = m.get(&ip).copied().unwrap_or(0);
        if held >= self.per_source {
            return None;
        }
        let permit = self.sem.clone().try_acquire_owned().ok()?;
        m.insert(ip, held + 1);
        Some(Permit {
            _permit: permit,
            source: Some((ip, self.by_source.clone())),
        })
    }

    pub fn size(&self) -> usize {
        self.size
    }
}

/// The permit pools of one agent.
#[derive(Debug)]
pub struct Limits {
    pub control: Pool,
    pub data_handshakes: Pool,
    pub local_handshakes: Pool,
    /// The preload library's connections until their request is read and checked (then
    /// a carried connection draws from `forwarded`, like the kernel redirect's).
    pub preload_handshakes: Pool,
    /// Streams between agents and rank streams.
    pub streams: Pool,
    /// Connections accepted by forward listeners (which anyone who can reach them may
    /// open), kept apart so they cannot use up the rank streams' pool. No per-source
    /// share: one client host with many connections (`iperf3 -P 100`, a connection pool)
    /// is the usual case.
    pub forwarded: Pool,
    refused: AtomicU64,
    /// Sources that presented the token recently (control API), and when.
    trusted: Mutex<HashMap<IpAddr, Instant>>,
    /// Refusals not yet logged, and when the last refusal was logged.
    quiet: Mutex<(Instant, u64)>,
}

/// How long a source stays trusted after presenting the token.
const TRUST_FOR: Duration = Duration::from_secs(15 * 60);
/// Most sources remembered as trusted.
const MAX_TRUSTED: usize = 1024;
/// At most one refusal log line per this interval (the rest are counted).
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(1);

impl Limits {
    pub fn new(control: usize, handshakes: usize, streams: usize) -> Limits {
        Limits {
            control: Pool::new(control),
            data_handshakes: Pool::new(handshakes),
            local_handshakes: Pool::new(handshakes),
            preload_handshakes: Pool::new(handshakes.min(PRELOAD_HANDSHAKES)),
            streams: Pool::new(streams),
            forwarded: Pool::new(streams),
            refused: AtomicU64::new(0),
            trusted: Mutex::new(HashMap::new()),
            quiet: Mutex::new((Instant::now() - REFUSAL_LOG_EVERY, 0)),
        }
    }

    /// Limits that fit `nofile` open files: the listeners' pools first (smaller when
    /// descriptors are scarce), then streams at about ten descriptors each.
    pub fn for_open_files(nofile: u64) -> Limits {
        let budget = nofile.saturating_sub(64);
        let control = (budget / 8).min(CONTROL_CONNECTIONS as u64);
        let handshakes = (budget / 8).min(HANDSHAKES as u64);
        // Pools with their reserves (a quarter more), then rank and agent streams and
        // forwarded connections, half of the rest each, at six descriptors a stream.
        let preload = handshakes.min(PRELOAD_HANDSHAKES as u64);
        let listeners = (control + 2 * handshakes + preload) * 5 / 4;
        let streams = (budget.saturating_sub(listeners) / 2 / FDS_PER_STREAM).clamp(16, 65536);
        Limits::new(control as usize, handshakes as usize, streams as usize)
    }

    /// Limits that fit this process's open-file limit.
    pub fn for_this_process() -> Limits {
        let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map(|(soft, _)| soft)
            .unwrap_or(1024);
        Limits::for_open_files(nofile)
    }

    /// Count a connection refused because a pool was full.
    pub fn note_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections refused so far because a pool was full.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Remember that `ip` presented the token.
    pub fn trust(&self, ip: IpAddr) {
        let mut t = self.trusted.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if t.len() >= MAX_TRUSTED && !t.contains_key(&ip) {
            t.retain(|_, at| now.duration_since(*at) < TRUST_FOR);
            if t.len() >= MAX_TRUSTED {
                if let Some(oldest) = t.iter().min_by_key(|(_, at)| **at).map(|(k, _)| *k) {
                    t.remove(&oldest);
                }
            }
        }
        t.insert(ip.to_canonical(), now);
    }

    /// Whether `ip` presented the token within the last 15 minutes.
    pub fn is_trusted(&self, ip: IpAddr) -> bool {
        let t = self.trusted.lock().unwrap_or_else(|e| e.into_inner());
        t.get(&ip.to_canonical())
            .is_some_and(|at| at.elapsed() < TRUST_FOR)
    }

    /// Log a refusal at warning level, at most once a second; the ones in between are
    /// counted and reported with the next line (so a flood cannot fill the disk).
    pub fn warn_refusal(&self, what: std::fmt::Arguments<'_>) {
        let mut q = self.quiet.lock().unwrap_or_else(|e| e.into_inner());
        if q.0.elapsed() >= REFUSAL_LOG_EVERY {
            if q.1 > 0 {
                tracing::warn!("{what} ({} similar refusals not logged)", q.1);
            } else {
                tracing::warn!("{what}");
            }
            *q = (Instant::now(), 0);
        } else {
            q.1 += 1;
        }
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::for_this_process()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_refuse_instead_of_queueing_and_refill_on_drop() {
        let p = Pool::new(2);
        let a = p.try_enter(None).unwrap();
        let _b = p.try_enter(None).unwrap();
        assert!(p.try_enter(None).is_none());
        drop(a);
        assert!(p.try_enter(None).is_some());
    }

    #[test]
    fn one_source_gets_a_quarter_of_a_pool() {
        let p = Pool::new(8);
        let bad: IpAddr = "198.18.0.66".parse().unwrap();
        let good: IpAddr = "198.18.0.1".parse().unwrap();
        let held: Vec<Permit> = (0..2).map(|_| p.try_enter(Some(bad)).unwrap()).collect();
        assert!(
            p.try_enter(Some(bad)).is_none(),
            "a third permit for one source"
        );
        assert!(
            p.try_enter(Some(good)).is_some(),
            "another source still gets in"
        );
        drop(held);
        assert!(
            p.try_enter(Some(bad)).is_some(),
            "permits come back on drop"
        );
    }

    #[test]
    fn trusted_clients_get_the_reserve_and_ipv6_counts_by_prefix() {
        let p = Pool::new(4);
        let held: Vec<Permit> = (0..4)
            .map(|i| {
                p.try_enter(Some(format!("198.18.0.{i}").parse().unwrap()))
                    .unwrap()
            })
            .collect();
        assert!(p.try_enter(Some("198.18.1.1".parse().unwrap())).is_none());
        assert!(p.try_enter_trusted().is_some(), "the reserve");
        drop(held);
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let b: IpAddr = "2001:db8::2".parse().unwrap();
        assert_eq!(source_key(a), source_key(b));
        let mapped: IpAddr = "::ffff:198.18.0.1".parse().unwrap();
        assert_eq!(source_key(mapped), "198.18.0.1".parse::<IpAddr>().unwrap());
        let l = Limits::new(4, 4, 4);
        let ip: IpAddr = "198.18.0.7".parse().unwrap();
        assert!(!l.is_trusted(ip));
        l.trust(ip);
        assert!(l.is_trusted(ip));
    }

    #[test]
    fn small_file_limits_shrink_the_pools() {
        let l = Limits::for_open_files(1024);
        let fds = (l.control.size() as u64 + 2 * l.data_handshakes.size() as u64) * 5 / 4
            + 6 * (l.streams.size() + l.forwarded.size()) as u64;
        assert!(fds <= 1024, "pools need {fds} descriptors of 1024");
        let big = Limits::for_open_files(1 << 20);
        assert_eq!(big.control.size(), CONTROL_CONNECTIONS);
        assert_eq!(big.data_handshakes.size(), HANDSHAKES);
        assert!(big.streams.size() > 10_000);
        // 1,000 forwarded connections from one host fit the usual limit of 20,000 files.
        assert!(Limits::for_open_files(20_000).forwarded.size() >= 1_000);
    }
}
