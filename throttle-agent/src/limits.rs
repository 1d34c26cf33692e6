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
//! opens hundreds of streams between two nodes at once. Whatever a client holds is
//! released by the handshake and header timeouts.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections at once on the control API (at most).
pub const CONTROL_CONNECTIONS: usize = 64;
/// Connections at once in their handshake, per transport listener (at most).
pub const HANDSHAKES: usize = 1024;
/// File descriptors one stream may use: two sockets and two pipes per direction.
const FDS_PER_STREAM: u64 = 10;

/// Permits held per source address.
type BySource = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// One listener's permits.
#[derive(Debug)]
pub struct Pool {
    sem: Arc<Semaphore>,
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

impl Pool {
    fn new(size: usize) -> Pool {
        let size = size.max(1);
        Pool {
            sem: Arc::new(Semaphore::new(size)),
            size,
            per_source: (size / 4).max(1),
            by_source: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// A permit, or `None` when the pool (or this source's share of it) is used up.
    /// `source` is the client's address; `None` for Unix sockets and authenticated streams.
    pub fn try_enter(&self, source: Option<IpAddr>) -> Option<Permit> {
        let Some(ip) = source else {
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
    pub streams: Pool,
    refused: AtomicU64,
}

impl Limits {
    pub fn new(control: usize, handshakes: usize, streams: usize) -> Limits {
        Limits {
            control: Pool::new(control),
            data_handshakes: Pool::new(handshakes),
            local_handshakes: Pool::new(handshakes),
            streams: Pool::new(streams),
            refused: AtomicU64::new(0),
        }
    }

    /// Limits that fit `nofile` open files: the listeners' pools first (smaller when
    /// descriptors are scarce), then streams at about ten descriptors each.
    pub fn for_open_files(nofile: u64) -> Limits {
        let budget = nofile.saturating_sub(64);
        let control = (budget / 8).min(CONTROL_CONNECTIONS as u64);
        let handshakes = (budget / 8).min(HANDSHAKES as u64);
        let streams =
            (budget.saturating_sub(control + 2 * handshakes) / FDS_PER_STREAM).clamp(16, 65536);
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
    fn small_file_limits_shrink_the_pools() {
        let l = Limits::for_open_files(1024);
        let fds = l.control.size() as u64
            + 2 * l.data_handshakes.size() as u64
            + 10 * l.streams.size() as u64;
        assert!(fds <= 1024, "pools need {fds} descriptors of 1024");
        let big = Limits::for_open_files(1 << 20);
        assert_eq!(big.control.size(), CONTROL_CONNECTIONS);
        assert_eq!(big.data_handshakes.size(), HANDSHAKES);
        assert!(big.streams.size() > 10_000);
    }
}
