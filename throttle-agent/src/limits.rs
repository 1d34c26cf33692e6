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
//! opens hundreds of streams between two nodes at once. On the preload port, where every
//! client comes from loopback, the share is per user (the client socket's owner).
//!
//! Trusted addresses are shared by everyone on those hosts (another user on the
//! controller's host, on a node), so a share per address cannot protect them: the pools
//! of connections that must prove themselves (control API: the token; data port, rank
//! endpoint, preload port: the handshake) evict their oldest unproven connection when a
//! newcomer finds them full. A client that proves itself at once (every real one sends its
//! request as it connects) gets in however many places a flood holds. Forward listeners'
//! connections have a pool of their own without a per-source share (one client host with
//! a thousand connections is the usual case there) and are never evicted, nor are
//! streams. Whatever a client holds is released by the handshake and header timeouts.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Connections at once on the control API (at most). An unproven connection costs a
/// descriptor and a small task; room for a burst of churn (another user opening and
/// closing connections as fast as one machine can) that the runtime has not yet reaped.
pub const CONTROL_CONNECTIONS: usize = 256;
/// Connections at once in their handshake, per transport listener (at most).
pub const HANDSHAKES: usize = 1024;
/// Connections at once in their request on the preload port (at most).
pub const PRELOAD_HANDSHAKES: usize = 256;
/// File descriptors one stream holds on an agent: two sockets, and a pipe (two
/// descriptors) per direction for splice.
const FDS_PER_STREAM: u64 = 6;

/// What a per-source share is counted against: a client's address (by [`source_key`]),
/// or, on the preload port where every client comes from loopback, its socket's owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    Addr(IpAddr),
    Uid(u32),
}

/// Permits held per source.
type BySource = Arc<Mutex<HashMap<Source, usize>>>;

/// The connections of an evicting pool that have not proven themselves yet (no token, no
/// completed handshake), oldest first.
#[derive(Debug, Default)]
struct Unproven {
    next: u64,
    waiting: BTreeMap<u64, Waiting>,
}

#[derive(Debug)]
struct Waiting {
    eviction: Arc<Eviction>,
    /// Whether its permit came from the reserve.
    reserve: bool,
    /// Its source, when known at admission (a newcomer evicts its own source's oldest
    /// first).
    source: Option<Source>,
    /// Its socket, once [`Permit::watch`] names it, with the socket's cookie (a number the
    /// kernel never gives another socket): one with a request waiting to be read is about
    /// to prove itself, and is evicted only when no quiet one is left.
    fd: Option<(RawFd, u64)>,
}

/// `SO_COOKIE` (Linux 4.13) as asm-generic numbers it (x86, arm, riscv, ...; the libc
/// crate does not export it for them).
const SO_COOKIE: libc::c_int = 57;

/// The kernel's cookie of the socket `fd` (`SO_COOKIE`), `None` if it is none.
fn cookie(fd: RawFd) -> Option<u64> {
    let mut c: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: SO_COOKIE writes one u64 into `c`, its length into `len`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_COOKIE,
            (&mut c as *mut u64).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(c)
}

/// Whether the watched socket has nothing to read (an idle connection, or one its client
/// closed: churn), as far as the kernel says. A descriptor whose number another socket
/// (or file) has taken since (its connection ended, its entry not yet gone) is not asked.
fn quiet((fd, watched): (RawFd, u64)) -> bool {
    if cookie(fd) != Some(watched) {
        return false;
    }
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD on a socket (its cookie checked just now) writes one int.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    r == 0 && n == 0
}

/// How many of the oldest unproven connections an eviction asks whether they are quiet
/// (two system calls each, under the pool's lock).
const QUIET_SCAN: usize = 64;

/// Set when a connection is evicted; its task is woken to close it.
#[derive(Debug, Default)]
struct Eviction {
    evicted: AtomicBool,
    wake: Notify,
}

/// One listener's permits.
#[derive(Debug)]
pub struct Pool {
    sem: Arc<Semaphore>,
    /// Extra permits only trusted clients may use (the cluster's agents on the data port,
    /// sources that recently presented the token on the control API), so that clients
    /// without the token cannot lock them out by filling the pool from many addresses.
    reserve: Arc<Semaphore>,
    size: usize,
    /// Most permits one source may hold.
    per_source: usize,
    by_source: BySource,
    /// `Some` for a pool whose connections are evicted, oldest unproven first, when it is
    /// full and another client comes: the control API and the handshake pools. Holding
    /// places costs an attacker nothing but connections; evicting the oldest makes a
    /// place for a client that proves itself at once (a controller sends its request as
    /// it connects), whatever the attacker's address (the controller's own host, a node
    /// of the cluster).
    unproven: Option<Arc<Mutex<Unproven>>>,
    /// Unproven connections evicted to make room: turned away like refused ones, and
    /// counted with them ([`Limits::refused`]), so that a flood shows in the status.
    evictions: AtomicU64,
}

/// Held while a connection is served; returns its place in the pool when dropped.
#[derive(Debug)]
pub struct Permit {
    permit: Option<OwnedSemaphorePermit>,
    source: Option<(Source, BySource)>,
    /// While the connection may be evicted: its place in the eviction order.
    pending: Option<Proof>,
}

/// A connection's standing in its pool's eviction order; [`Proof::prove`] takes it out
/// (the connection presented the token). Cheap to clone (into a request's extensions).
#[derive(Clone, Debug)]
pub struct Proof {
    id: u64,
    eviction: Arc<Eviction>,
    unproven: Arc<Mutex<Unproven>>,
}

impl Proof {
    /// The connection has proven itself: it is never evicted.
    pub fn prove(&self) {
        lock(&self.unproven).waiting.remove(&self.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Permit {
    /// Name the connection's socket, so that eviction can tell a connection with its
    /// request waiting (a client that proves itself at once, as a controller does) from
    /// one with nothing to say (a flood's, or a churn's closed at once): the quiet ones
    /// go first.
    pub fn watch(&self, fd: RawFd) {
        let Some(p) = &self.pending else { return };
        let Some(c) = cookie(fd) else { return };
        if let Some(w) = lock(&p.unproven).waiting.get_mut(&p.id) {
            w.fd = Some((fd, c));
        }
    }

    /// The handle that marks this connection proven, where it may be evicted.
    pub fn proof(&self) -> Option<Proof> {
        self.pending.clone()
    }

    /// `work` (the connection's unproven part: its handshake, its request), or `None`
    /// when the connection is evicted first.
    pub async fn unless_evicted<T>(&self, work: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::select! {
            out = work => Some(out),
            () = self.evicted() => None,
        }
    }

    /// Resolves when this connection is evicted to make room for another (never for a
    /// pool that does not evict, nor once proven); its task then closes it.
    pub async fn evicted(&self) {
        let Some(p) = &self.pending else {
            return std::future::pending().await;
        };
        while !p.eviction.evicted.load(Ordering::Acquire) {
            p.eviction.wake.notified().await;
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(p) = self.pending.take() {
            // Under the lock: an eviction either happened before (the evictor took this
            // permit's place: forget it) or cannot happen any more.
            let mut u = lock(&p.unproven);
            u.waiting.remove(&p.id);
            if p.eviction.evicted.load(Ordering::Acquire) {
                if let Some(permit) = self.permit.take() {
                    permit.forget();
                }
            }
        }
        if let Some((source, map)) = &self.source {
            let mut m = lock(map);
            if let Some(n) = m.get_mut(source) {
                *n -= 1;
                if *n == 0 {
                    m.remove(source);
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
    /// A pool whose connections are never evicted (streams).
    fn new(size: usize) -> Pool {
        let size = size.max(1);
        Pool {
            sem: Arc::new(Semaphore::new(size)),
            reserve: Arc::new(Semaphore::new((size / 4).max(1))),
            size,
            per_source: (size / 4).max(1),
            by_source: Arc::new(Mutex::new(HashMap::new())),
            unproven: None,
            evictions: AtomicU64::new(0),
        }
    }

    /// A pool of connections that must prove themselves (token, handshake): when it is
    /// full, the oldest unproven one makes room for a newcomer.
    fn evicting(size: usize) -> Pool {
        Pool {
            unproven: Some(Arc::default()),
            ..Pool::new(size)
        }
    }

    /// A semaphore permit for a newcomer from `source`: from the pool, from the reserve
    /// (trusted only), or the place of an unproven connection (evicted): the oldest of
    /// the newcomer's own source if it has one waiting, else the oldest of all (trusted
    /// newcomers may take a reserve place, others only a pool place). The permit and
    /// whether it is a reserve one.
    fn place(&self, trusted: bool, source: Option<Source>) -> Option<(OwnedSemaphorePermit, bool)> {
        if let Ok(p) = self.sem.clone().try_acquire_owned() {
            return Some((p, false));
        }
        if trusted {
            if let Ok(p) = self.reserve.clone().try_acquire_owned() {
                return Some((p, true));
            }
        }
        self.evict(|w| (trusted || !w.reserve) && (source.is_some() && w.source == source))
            .or_else(|| self.evict(|w| trusted || !w.reserve))
    }

    /// Evict the oldest unproven connection `eligible` allows, a quiet one (nothing to
    /// read: [`Permit::watch`]) if there is one; its place, taken at once.
    fn evict(&self, eligible: impl Fn(&Waiting) -> bool) -> Option<(OwnedSemaphorePermit, bool)> {
        let unproven = self.unproven.as_ref()?;
        let mut u = lock(unproven);
        let victim = u
            .waiting
            .iter()
            .take(QUIET_SCAN)
            .find(|(_, w)| eligible(w) && w.fd.is_some_and(quiet))
            .or_else(|| u.waiting.iter().find(|(_, w)| eligible(w)))
            .map(|(id, _)| *id)?;
        let w = u.waiting.remove(&victim)?;
        self.evictions.fetch_add(1, Ordering::Relaxed);
        w.eviction.evicted.store(true, Ordering::Release);
        w.eviction.wake.notify_one();
        // The victim forgets its permit when it ends (see `Permit`'s drop); its place is
        // added back here and taken at once.
        let sem = if w.reserve { &self.reserve } else { &self.sem };
        sem.add_permits(1);
        let p = sem.clone().try_acquire_owned().ok()?;
        Some((p, w.reserve))
    }

    fn permit(
        &self,
        place: (OwnedSemaphorePermit, bool),
        source: Option<(Source, BySource)>,
        from: Option<Source>,
    ) -> Permit {
        let (permit, reserve) = place;
        let pending = self.unproven.as_ref().map(|unproven| {
            let eviction = Arc::new(Eviction::default());
            let mut u = lock(unproven);
            let id = u.next;
            u.next += 1;
            u.waiting.insert(
                id,
                Waiting {
                    eviction: eviction.clone(),
                    reserve,
                    source: from,
                    fd: None,
                },
            );
            Proof {
                id,
                eviction,
                unproven: unproven.clone(),
            }
        });
        Permit {
            permit: Some(permit),
            source,
            pending,
        }
    }

    /// A permit for a trusted client (from `source`, when known): from the pool, the
    /// reserve, or an evicted connection's place; no per-source share.
    pub fn try_enter_trusted(&self, source: Option<IpAddr>) -> Option<Permit> {
        let from = source.map(|ip| Source::Addr(source_key(ip)));
        let place = self.place(true, from)?;
        Some(self.permit(place, None, from))
    }

    /// A permit, or `None` when the pool (or this source's share of it) is used up and no
    /// unproven connection can be evicted. A source whose share is used up takes the
    /// place of its own oldest unproven connection: a client that shares its address with
    /// a flood (another user on its host) still gets in by proving itself at once.
    /// `source` is the client's address; `None` for Unix sockets, authenticated streams
    /// and the preload port (which enters by user, [`Pool::try_enter_from`]).
    pub fn try_enter(&self, source: Option<IpAddr>) -> Option<Permit> {
        self.try_enter_from(source.map(|ip| Source::Addr(source_key(ip))))
    }

    /// [`Pool::try_enter`] for a source given as such (the preload port's users).
    pub fn try_enter_from(&self, source: Option<Source>) -> Option<Permit> {
        let Some(key) = source else {
            let place = self.place(false, None)?;
            return Some(self.permit(place, None, None));
        };
        let mut m = lock(&self.by_source);
        let held = m.get(&key).copied().unwrap_or(0);
        let place = if held >= self.per_source {
            self.evict(|w| !w.reserve && w.source == Some(key))?
        } else {
            self.place(false, Some(key))?
        };
        m.insert(key, held + 1);
        drop(m);
        Some(self.permit(place, Some((key, self.by_source.clone())), Some(key)))
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// The most places one source (address or user) may hold.
    pub fn per_source(&self) -> usize {
        self.per_source
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
            control: Pool::evicting(control),
            data_handshakes: Pool::evicting(handshakes),
            local_handshakes: Pool::evicting(handshakes),
            preload_handshakes: Pool::evicting(handshakes.min(PRELOAD_HANDSHAKES)),
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

    /// Connections refused so far because a pool was full, or evicted from a full pool
    /// before they proved themselves.
    pub fn refused(&self) -> u64 {
        [
            &self.control,
            &self.data_handshakes,
            &self.local_handshakes,
            &self.preload_handshakes,
        ]
        .iter()
        .map(|p| p.evictions.load(Ordering::Relaxed))
        .sum::<u64>()
            + self.refused.load(Ordering::Relaxed)
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

    /// Issue 43, finding 3: a flood that opens and closes connections (churn) evicts its
    /// own quiet connections, not a client's whose request is waiting to be read, though
    /// that one is older: the client is not reset for a newcomer.
    #[test]
    fn churn_evicts_quiet_connections_before_one_with_its_request_waiting() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let p = Pool::evicting(4);
        let from: IpAddr = "127.0.0.1".parse().unwrap();
        // The client comes first and sends its request; the flood's three connections
        // send nothing (one closed at once).
        let mut client = std::net::TcpStream::connect(at).unwrap();
        client.write_all(b"GET /status HTTP/1.1\r\n\r\n").unwrap();
        let mut held = Vec::new();
        let (served, _) = l.accept().unwrap();
        let mine = p.try_enter_trusted(Some(from)).unwrap();
        mine.watch(served.as_raw_fd());
        let mut flood = Vec::new();
        for _ in 0..3 {
            let c = std::net::TcpStream::connect(at).unwrap();
            let (s, _) = l.accept().unwrap();
            let permit = p.try_enter_trusted(Some(from)).unwrap();
            permit.watch(s.as_raw_fd());
            held.push((s, permit));
            flood.push(c);
        }
        flood.remove(0);
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Full (4 + 1 reserve); three newcomers evict the flood's three.
        let extra = p.try_enter_trusted(Some(from)).unwrap();
        let newcomers: Vec<Permit> = (0..3)
            .map(|_| p.try_enter_trusted(Some(from)).unwrap())
            .collect();
        assert!(
            !mine
                .pending
                .as_ref()
                .unwrap()
                .eviction
                .evicted
                .load(Ordering::Acquire),
            "the client with its request waiting was evicted before the quiet flood"
        );
        assert!(held.iter().all(|(_, p)| p
            .pending
            .as_ref()
            .unwrap()
            .eviction
            .evicted
            .load(Ordering::Acquire)));
        // With none quiet left, the oldest goes, as before: the client.
        let last = p.try_enter_trusted(Some(from)).unwrap();
        assert!(mine
            .pending
            .as_ref()
            .unwrap()
            .eviction
            .evicted
            .load(Ordering::Acquire));
        drop((extra, newcomers, last, client));
    }

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
        assert!(p.try_enter_trusted(None).is_some(), "the reserve");
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
    fn an_eviction_counts_as_a_refusal() {
        let l = Limits::new(4, 4, 4);
        let ip: IpAddr = "198.18.0.9".parse().unwrap();
        // One source's share is a quarter of the pool: the second connection from it
        // takes the place of its first.
        let first = l.control.try_enter(Some(ip)).unwrap();
        assert_eq!(l.refused(), 0);
        let second = l
            .control
            .try_enter(Some(ip))
            .expect("its own oldest made room");
        assert_eq!(l.refused(), 1, "the evicted connection was turned away");
        drop((first, second));
    }

    #[test]
    fn a_full_pool_evicts_its_oldest_unproven_connection_never_a_proven_one() {
        let p = Pool::evicting(4);
        let controller = p.try_enter_trusted(None).unwrap();
        controller.proof().unwrap().prove();
        // A flood from the controller's own address (another user there) fills the rest.
        let flood: Vec<Permit> = (0..4).map(|_| p.try_enter_trusted(None).unwrap()).collect();
        // The controller comes back with a second connection: the oldest unproven one goes.
        let again = p.try_enter_trusted(None).expect("a place made by eviction");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            assert!(
                flood[0]
                    .unless_evicted(std::future::pending::<()>())
                    .await
                    .is_none(),
                "the oldest is told to close"
            );
            let young = tokio::time::timeout(Duration::from_millis(50), flood[1].evicted()).await;
            assert!(young.is_err(), "only one is evicted");
            let proven =
                tokio::time::timeout(Duration::from_millis(50), controller.evicted()).await;
            assert!(proven.is_err(), "a proven connection stays");
        });
        // Places add up: dropping everything gives back exactly the pool and its reserve.
        drop(flood);
        drop(again);
        drop(controller);
        assert_eq!(p.sem.available_permits(), 4);
        assert_eq!(p.reserve.available_permits(), 1);
        // An untrusted newcomer takes only a pool place, not a trusted client's reserve.
        let held: Vec<Permit> = (0..4).map(|_| p.try_enter(None).unwrap()).collect();
        let r = p.try_enter_trusted(None).unwrap();
        for h in &held {
            h.proof().unwrap().prove();
        }
        assert!(
            p.try_enter(None).is_none(),
            "only the reserve's connection is unproven"
        );
        drop(r);
        // A pool that does not evict refuses.
        let s = Pool::new(1);
        let _a = s.try_enter(None).unwrap();
        assert!(s.try_enter(None).is_none());
    }

    #[test]
    fn a_source_over_its_share_takes_the_place_of_its_own_oldest_unproven() {
        // Another user on the controller's host (same address, not trusted yet) holds
        // that address's whole share; the controller still gets in, at the flood's cost.
        let p = Pool::evicting(8);
        let host: IpAddr = "198.18.0.1".parse().unwrap();
        let other: IpAddr = "198.18.0.2".parse().unwrap();
        let bystander = p.try_enter(Some(other)).unwrap();
        let flood: Vec<Permit> = (0..2).map(|_| p.try_enter(Some(host)).unwrap()).collect();
        let controller = p
            .try_enter(Some(host))
            .expect("its own source's oldest makes room");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            assert!(
                tokio::time::timeout(Duration::from_millis(50), flood[0].evicted())
                    .await
                    .is_ok(),
                "the flood's oldest goes"
            );
            assert!(
                tokio::time::timeout(Duration::from_millis(50), bystander.evicted())
                    .await
                    .is_err(),
                "another source's connection stays"
            );
        });
        controller.proof().unwrap().prove();
        drop(flood);
        drop(controller);
        drop(bystander);
        assert_eq!(p.sem.available_permits(), 8, "every place came back");
    }

    #[test]
    fn a_user_over_its_share_gives_way_to_itself_only() {
        let p = Pool::evicting(8);
        let (u, v) = (Source::Uid(1000), Source::Uid(0));
        let other = p.try_enter_from(Some(v)).unwrap();
        let held: Vec<Permit> = (0..2).map(|_| p.try_enter_from(Some(u)).unwrap()).collect();
        let third = p.try_enter_from(Some(u)).expect("its own oldest gives way");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            for (c, evicted) in [(&held[0], true), (&held[1], false), (&other, false)] {
                let r = tokio::time::timeout(Duration::from_millis(30), c.evicted()).await;
                assert_eq!(r.is_ok(), evicted);
            }
        });
        drop((held, third, other));
        assert_eq!(p.sem.available_permits(), 8);
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
