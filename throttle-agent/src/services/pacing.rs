//! Kernel-paced links (`--links kernel`): the program's sockets connect to their peers
//! directly and the kernel paces each at its share of the links it crosses; the agent only
//! sets the rates.
//!
//! * [`serve()`]: the pacing socket (abstract Unix name
//!   [`throttle_proto::preload::pace_socket_name`]), where the preload library registers
//!   each connection between nodes before it connects it (or as it accepts one). The
//!   agent serves its own user only (root: any), takes the socket from the registering
//!   process for a moment (`pidfd_getfd`: the kernel lets it only where it could trace that
//!   process), checks it is a TCP socket to another node's program, sets its rate and
//!   closes its copy.
//! * [`run`]: every [`POLL`] ([`POLL_STEADY`] once the flows settled), each paced
//!   socket's `TCP_INFO` is read (a fresh copy, closed within the pass): a socket with
//!   data on its way counts as sending for [`HOLD`] more (a connecting one, once
//!   connected, only if its peer is the one it was registered for); this node's row (its
//!   rates and sending sockets per destination) goes to every other agent when it changes ([`send_rows`], over `PeerWant::Flows`), every
//!   node's rows give each socket its max-min share (`link::shares`), and a socket whose
//!   share changed gets its new rate. A socket its program closed (or whose descriptor now
//!   names another socket, or whose process ended) is forgotten.
//! * [`receive`]: another agent's rows, on the data port, authenticated by its handshake:
//!   only a holder of the cluster token can send a node's rows (as with every data-port
//!   stream, a token holder may speak for any node of the directory).
//!
//! The kernel paces what it sends: a node's ingress is held by its senders' shares, which
//! count it. On a host of the node's own (`--egress-device`) every paced socket also goes
//! into the device's egress queue ([`crate::transport::egress_queue`]), which the pass
//! sets to the link's rate when it changed, so that no segment burst leaves faster than
//! the link. Added latency is not emulated in this mode.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::watch;
use tracing::debug;

use throttle_proto::flows::{FlowRow, UNLIMITED};
use throttle_proto::name::Name;
use throttle_proto::preload::{PaceReply, PaceRequest, PaceSide, PACE_REQUEST_LEN};

use crate::limits::{Permit, Source};
use crate::link::shares;
use crate::serve::{self, AtStop};
use crate::shutdown::Shutdown;
use crate::state::paced::{PacedSocket, Pacing};
use crate::state::Agent;
use crate::transport::kernel;
use crate::transport::wire::PeerWant;

/// How often the paced sockets are read and their shares computed: every [`POLL`] for
/// [`SETTLE`] after the flows changed, then every [`POLL_STEADY`] while they do not (a
/// long stream costs its agent a quarter of the reads).
pub const POLL: Duration = Duration::from_millis(5);
pub const POLL_STEADY: Duration = Duration::from_millis(20);
pub const SETTLE: Duration = Duration::from_millis(200);
/// How long a socket counts as sending after it last had data on its way: a socket that
/// sends in bursts keeps its share between them instead of moving every other one (longer
/// than [`POLL_STEADY`], so that a socket busy between two reads is never missed).
pub const HOLD: Duration = Duration::from_millis(40);
/// A row is sent again after this long unchanged; a node's row older than [`STALE`] no
/// longer counts (its agent is gone without closing its stream: one that closes it takes
/// its row with it at once). Rows change when flows start and stop and when a link's
/// shape changes, and are sent then: the refresh is only the last resort, and each one
/// wakes every agent of the cluster (decision 0050, "Agents' CPU").
pub const REFRESH: Duration = Duration::from_secs(2);
pub const STALE: Duration = Duration::from_secs(5);
/// Most sockets one agent paces at once (fewer where its open-file limit is lower: a
/// quarter of it, since each may hold a pidfd), and (an agent run as root serves every
/// user) a quarter of that for one user's.
pub const MAX_PACED: usize = 16 * 1024;

fn max_paced() -> usize {
    let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(1024);
    MAX_PACED.min(usize::try_from(nofile / 4).unwrap_or(MAX_PACED))
}
/// How long a registering library may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Bind the pacing socket for the agent whose preload port is `preload`.
pub fn bind(preload: std::net::SocketAddr) -> io::Result<UnixListener> {
    use std::os::linux::net::SocketAddrExt;
    let name = throttle_proto::preload::pace_socket_name(preload);
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    let std = std::os::unix::net::UnixListener::bind_addr(&addr)?;
    std.set_nonblocking(true)?;
    UnixListener::from_std(std)
}

/// Take registrations until shutdown.
pub async fn serve(agent: Arc<Agent>, listener: UnixListener, shutdown: Shutdown) {
    let admitting = agent.clone();
    let admit = move |stream: &UnixStream, (): ()| {
        let me = nix::unistd::geteuid().as_raw();
        let uid = stream.peer_cred().ok().map(|c| c.uid());
        match uid {
            Some(uid) if me == 0 || uid == me => {
                let permit = admitting
                    .limits
                    .preload_handshakes
                    .try_enter_from(Some(Source::Uid(uid)));
                if permit.is_none() {
                    admitting.limits.note_refused();
                }
                permit
            }
            _ => {
                admitting.limits.note_refused();
                admitting.limits.warn_refusal(format_args!(
                    "a pacing registration from uid {uid:?} refused: this agent paces uid {me}'s sockets only"
                ));
                None
            }
        }
    };
    let handle = move |stream: UnixStream, (): (), permit: Permit| {
        let agent = agent.clone();
        async move {
            if let Err(e) = register(&agent, stream, permit).await {
                debug!(error = %e, "a pacing registration ended with an error");
            }
        }
    };
    serve::serve(
        "the pacing socket",
        listener,
        Some(shutdown),
        AtStop::Cut,
        admit,
        handle,
    )
    .await
}

async fn register(agent: &Agent, mut stream: UnixStream, _permit: Permit) -> io::Result<()> {
    let Some(pacing) = agent.pacing.as_ref() else {
        return Ok(());
    };
    let mut b = [0u8; PACE_REQUEST_LEN];
    match tokio::time::timeout(REQUEST_TIMEOUT, stream.read_exact(&mut b)).await {
        Ok(Ok(_)) => {}
        _ => return Ok(()),
    }
    let errno = match PaceRequest::decode(&b) {
        Err(e) => {
            agent
                .limits
                .warn_refusal(format_args!("bad pacing registration: {e}"));
            libc::EINVAL
        }
        Ok(req) => match pace(agent, pacing, &stream, req) {
            Ok(()) => 0,
            Err(Refused { errno, why }) => {
                pacing.refused.fetch_add(1, Ordering::Relaxed);
                if req.side == PaceSide::Accept {
                    pacing.unpaced.fetch_add(1, Ordering::Relaxed);
                }
                agent.limits.warn_refusal(format_args!(
                    "could not pace a socket to {} (fd {}): {why} ({})",
                    req.peer,
                    req.fd,
                    io::Error::from_raw_os_error(errno)
                ));
                errno
            }
        },
    };
    stream.write_all(&PaceReply { errno }.encode()).await
}

/// Why a registration was refused: the errno the library gets, and what the agent logs.
struct Refused {
    errno: i32,
    why: &'static str,
}

fn fail(errno: i32, why: &'static str) -> Result<(), Refused> {
    Err(Refused { errno, why })
}

/// The errno of a failed call, with what was being done.
fn failed(why: &'static str) -> impl Fn(io::Error) -> Refused {
    move |e| Refused {
        errno: e.raw_os_error().unwrap_or(libc::EIO),
        why,
    }
}

/// Take the registering process's socket, check it, set its rate, remember it.
fn pace(
    agent: &Agent,
    pacing: &Pacing,
    stream: &UnixStream,
    req: PaceRequest,
) -> Result<(), Refused> {
    let peer_ip = req.peer.ip().to_canonical();
    let Some(peer) = agent
        .directory
        .node_at(peer_ip)
        .filter(|n| *n != agent.node)
    else {
        return fail(libc::EHOSTUNREACH, "not another node's address");
    };
    if !crate::intercept::preload::node_list(agent).intercepts(req.peer) {
        return fail(libc::EHOSTUNREACH, "not another node's program port");
    }
    let (process, uid, pid) =
        kernel::peer_process(stream).map_err(failed("cannot name the registering process"))?;
    let me = nix::unistd::geteuid().as_raw();
    if me != 0 && uid != me {
        return fail(libc::EPERM, "another user's process");
    }
    let taken = kernel::take(&process, req.fd).map_err(failed(
        "cannot take the socket from its process (pidfd_getfd: tracing it is not allowed?)",
    ))?;
    let Some((inode, owner)) = kernel::socket_owner(&taken).filter(|_| kernel::is_tcp(&taken))
    else {
        return fail(libc::ENOTSOCK, "not a TCP socket");
    };
    // The registering user's own socket only: a process that ran a set-user-ID program
    // since it connected holds sockets of another user (a root agent would otherwise pace
    // or read a privileged program's connection).
    if owner != uid {
        return fail(libc::EPERM, "a socket another user created");
    }
    // An accepted socket is connected: its peer is the one claimed.
    if req.side == PaceSide::Accept
        && kernel::peer(&taken).map(|p| p.ip().to_canonical()) != Some(peer_ip)
    {
        return fail(libc::EINVAL, "the socket's peer is not the one named");
    }
    let key = kernel::process_key(&process);
    let rate = rate_for(agent, pacing, &peer);
    // Into the queue first: a socket refused here is left as it was.
    if pacing.egress_queue.is_some() {
        kernel::set_priority(&taken, crate::transport::egress_queue::CLASS)
            .map_err(failed("cannot put it into the egress queue (SO_PRIORITY)"))?;
    }
    kernel::set_pacing_rate(&taken, rate).map_err(failed("cannot set its pacing rate"))?;
    let counters = kernel::counters(&taken).unwrap_or_default();
    drop(taken);
    let limit = max_paced();
    let mut sockets = pacing.sockets.lock().unwrap_or_else(|e| e.into_inner());
    // A socket registered again (a second connect, a dup) is one socket, and still
    // counted as one.
    let again = sockets.iter().position(|s| s.inode == inode);
    let others = sockets.len() - usize::from(again.is_some());
    let theirs = sockets
        .iter()
        .filter(|s| s.uid == uid && s.inode != inode)
        .count();
    if others >= limit || theirs >= limit / 4 {
        return fail(libc::EAGAIN, "as many sockets paced as this agent may");
    }
    if let Some(i) = again {
        sockets.swap_remove(i);
    }
    // One pidfd per process where the kernel tells processes apart by their pidfd's
    // inode (pidfs): the agent's descriptors grow with the processes, not their sockets.
    let shared = sockets
        .iter()
        .find(|s| s.process_key == key && s.pid == pid && kernel::distinct_pidfds())
        .map(|s| s.process.clone());
    let process = shared.unwrap_or_else(|| Arc::new(process));
    sockets.push(PacedSocket {
        process,
        process_key: key,
        pid,
        fd: req.fd,
        inode,
        peer,
        peer_ip,
        // An accepted socket's peer was checked above.
        checked: req.side == PaceSide::Accept,
        side: req.side,
        uid,
        rate: Some(rate),
        counters,
        last_active: None,
    });
    drop(sockets);
    if again.is_none() {
        pacing.registered.fetch_add(1, Ordering::Relaxed);
    }
    pacing.generation.fetch_add(1, Ordering::Relaxed);
    pacing.changed.notify_one();
    Ok(())
}

/// The rate a new socket to `peer` starts at: its share as last computed, or what one
/// starting now would get.
fn rate_for(agent: &Agent, pacing: &Pacing, peer: &Name) -> Option<u64> {
    if let Some(r) = pacing
        .rates
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(peer)
    {
        return *r;
    }
    let rows = rows(agent, pacing, own_row(agent, &HashMap::new()));
    let rates = shares::node_rates(&agent.node, &rows, std::slice::from_ref(peer));
    rates.get(peer).copied().flatten().map(as_rate)
}

fn as_rate(r: f64) -> u64 {
    r.round().clamp(1.0, (UNLIMITED - 1) as f64) as u64
}

/// This node's row: its link's rate both ways and its sending sockets per destination.
fn own_row(agent: &Agent, sending: &HashMap<Name, u32>) -> FlowRow {
    let rate = agent.link.shape().rate().map(as_rate).unwrap_or(UNLIMITED);
    let mut flows: Vec<(Name, u32)> = sending.iter().map(|(n, c)| (n.clone(), *c)).collect();
    flows.sort();
    FlowRow {
        egress: rate,
        ingress: rate,
        flows,
    }
}

/// Every node's row that counts now: this node's and the others' fresh ones.
fn rows(agent: &Agent, pacing: &Pacing, own: FlowRow) -> Vec<(Name, FlowRow)> {
    let now = Instant::now();
    let mut rows = vec![(agent.node.clone(), own)];
    let others = pacing.rows.lock().unwrap_or_else(|e| e.into_inner());
    for (n, (at, row)) in others.iter() {
        if now.duration_since(*at) < STALE && *n != agent.node {
            rows.push((n.clone(), row.clone()));
        }
    }
    rows
}

/// What the shares are computed from: every node's row, and this node's destinations.
type ShareInputs = (Vec<(Name, FlowRow)>, Vec<Name>);

/// Read the sockets, tell the others, set the shares: every [`POLL`] while sockets are
/// paced (and at once when one is registered or a row comes), until shutdown.
pub async fn run(agent: Arc<Agent>, mut shutdown: Shutdown) {
    let Some(pacing) = agent.pacing.as_ref() else {
        return;
    };
    let (tx, rx) = watch::channel(own_row(&agent, &HashMap::new()));
    let mut senders: HashMap<Name, tokio::task::JoinHandle<()>> = HashMap::new();
    let mut sent_at = Instant::now();
    let mut senders_checked: Option<Instant> = None;
    // What the shares were last computed from: they are computed again only when it
    // changes.
    let mut computed_from: Option<ShareInputs> = None;
    let mut seen_generation = u64::MAX;
    let mut changed_at = Instant::now();
    loop {
        // With nothing paced, only a registration, a row or the link's shape changes
        // anything: each wakes the loop.
        let wait = if pacing.paced_now() == 0 {
            REFRESH
        } else if changed_at.elapsed() < SETTLE {
            POLL
        } else {
            POLL_STEADY
        };
        tokio::select! {
            _ = shutdown.wait() => break,
            _ = tokio::time::sleep(wait) => {}
            _ = pacing.changed.notified() => {}
            _ = agent.link.shape_changed.notified() => {}
        }
        let now = Instant::now();
        follow_shape(&agent, pacing).await;
        let sending = read_sockets(pacing, now, agent.link.shape().rate());
        let row = own_row(&agent, &sending);
        let row_changed = *tx.borrow() != row;
        if row_changed || sent_at.elapsed() >= REFRESH {
            tx.send_replace(row.clone());
            sent_at = now;
        }
        // One sender per other node of the directory, started again if it ended.
        if senders_checked.is_none_or(|t| now.duration_since(t) >= REFRESH) {
            senders_checked = Some(now);
            for n in agent.directory.nodes() {
                if n.name == agent.node {
                    continue;
                }
                let gone = senders.get(&n.name).is_none_or(|h| h.is_finished());
                if gone {
                    let task = tokio::spawn(send_rows(agent.clone(), n.name.clone(), rx.clone()));
                    senders.insert(n.name.clone(), task);
                }
            }
        }
        // Nothing the shares depend on changed (rows going stale are caught every
        // REFRESH, when the row is sent again).
        let generation = pacing.generation.load(Ordering::Relaxed);
        if !row_changed && generation == seen_generation && sent_at != now {
            continue;
        }
        if row_changed || generation != seen_generation {
            changed_at = now;
        }
        seen_generation = generation;
        let all = rows(&agent, pacing, row);
        let dests: Vec<Name> = {
            let sockets = pacing.sockets.lock().unwrap_or_else(|e| e.into_inner());
            let mut d: Vec<Name> = sockets.iter().map(|s| s.peer.clone()).collect();
            d.sort();
            d.dedup();
            d
        };
        let inputs = (all, dests);
        if computed_from.as_ref() == Some(&inputs) {
            continue;
        }
        let rates: HashMap<Name, Option<u64>> =
            shares::node_rates(&agent.node, &inputs.0, &inputs.1)
                .into_iter()
                .map(|(n, r)| (n, r.map(as_rate)))
                .collect();
        apply(pacing, &rates);
        *pacing.rates.lock().unwrap_or_else(|e| e.into_inner()) = rates;
        computed_from = Some(inputs);
    }
    for (_, t) in senders {
        t.abort();
    }
}

/// Set the egress queue (where there is one) to the link's rate when that changed since
/// it was last set. `tc` runs off the runtime's thread; a failure is logged, and tried
/// again at the link's next change.
async fn follow_shape(agent: &Arc<Agent>, pacing: &Pacing) {
    let rate = agent.link.shape().rate();
    if pacing
        .egress_queue
        .as_ref()
        .is_none_or(|q| q.asked_for(rate))
    {
        return;
    }
    let a = agent.clone();
    let set = tokio::task::spawn_blocking(move || {
        let Some(q) = a.pacing.as_ref().and_then(|p| p.egress_queue.as_ref()) else {
            return Ok(());
        };
        q.set(rate)
    })
    .await;
    match set {
        Ok(Ok(())) => tracing::debug!(?rate, "egress queue set to the link's rate"),
        Ok(Err(e)) => tracing::warn!("egress queue not set to the link's rate: {e}"),
        Err(e) => tracing::warn!("egress queue not set to the link's rate: {e}"),
    }
}

/// Read every paced socket's counters; forget the ones gone; hold what they moved since
/// the last read to the link's `rate` ([`Conformance`](crate::state::paced::Conformance)).
/// The sending sockets per destination.
fn read_sockets(pacing: &Pacing, now: Instant, rate: Option<f64>) -> HashMap<Name, u32> {
    let mut sending: HashMap<Name, u32> = HashMap::new();
    let (mut sent, mut received) = (0u64, 0u64);
    let mut sockets = pacing.sockets.lock().unwrap_or_else(|e| e.into_inner());
    sockets.retain_mut(|s| {
        let taken = match kernel::take(&s.process, s.fd) {
            Ok(t) => t,
            // Closed, or its process ended (a child it forked may still hold the socket:
            // it keeps its last rate).
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBADF | libc::ESRCH)) => {
                pacing.forget(s);
                return false;
            }
            // Still open but out of reach (the agent out of descriptors, the process
            // now another user's): no longer followed, and counted as unpaced.
            Err(_) => {
                pacing.lost.fetch_add(1, Ordering::Relaxed);
                pacing.forget(s);
                return false;
            }
        };
        if kernel::inode(&taken) != Some(s.inode) {
            pacing.forget(s);
            return false;
        }
        match kernel::counters(&taken) {
            Ok(c) => {
                if c.notsent > 0 || c.unacked > 0 || c.bytes_acked > s.counters.bytes_acked {
                    s.last_active = Some(now);
                }
                sent += c.bytes_acked.saturating_sub(s.counters.bytes_acked);
                received += c.bytes_received.saturating_sub(s.counters.bytes_received);
                s.counters = c;
            }
            Err(_) => {
                pacing.lost.fetch_add(1, Ordering::Relaxed);
                pacing.forget(s);
                return false;
            }
        }
        // A connecting socket, once connected, must be connected where its registration
        // said: one that is not is no flow between nodes (its rate is lifted, it no longer
        // counts, and the refusal is counted).
        if !s.checked && s.counters.state != kernel::SYN_SENT {
            match kernel::peer(&taken) {
                Some(p) if p.ip().to_canonical() == s.peer_ip => s.checked = true,
                Some(_) => {
                    let _ = kernel::set_pacing_rate(&taken, None);
                    pacing.refused.fetch_add(1, Ordering::Relaxed);
                    pacing.forget(s);
                    return false;
                }
                // Not connected (a connect that failed): nothing to pace, forgotten when
                // its program closes it.
                None => {}
            }
        }
        // Only a socket connected to the node it was registered for is a flow.
        if s.checked && s.last_active.is_some_and(|t| now.duration_since(t) < HOLD) {
            *sending.entry(s.peer.clone()).or_default() += 1;
        }
        true
    });
    let paced = sockets.len();
    drop(sockets);
    pacing
        .conformance
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .account(now, rate, paced, sent, received);
    sending
}

/// Give every socket whose share changed its new rate.
fn apply(pacing: &Pacing, rates: &HashMap<Name, Option<u64>>) {
    let mut sockets = pacing.sockets.lock().unwrap_or_else(|e| e.into_inner());
    for s in sockets.iter_mut() {
        let Some(want) = rates.get(&s.peer).copied() else {
            continue;
        };
        if s.rate == Some(want) {
            continue;
        }
        let set = kernel::take(&s.process, s.fd)
            .ok()
            .filter(|t| kernel::inode(t) == Some(s.inode))
            .map(|t| kernel::set_pacing_rate(&t, want));
        match set {
            Some(Ok(())) => {
                s.rate = Some(want);
                pacing.rate_changes.fetch_add(1, Ordering::Relaxed);
            }
            Some(Err(e)) => {
                debug!(fd = s.fd, pid = s.pid, error = %e, "could not set a paced socket's rate");
            }
            // Gone since it was read: forgotten at the next pass.
            None => {}
        }
    }
}

/// Send this node's row to `node`'s agent whenever it changes, over one authenticated
/// stream, dialled again after a failure (a second later).
async fn send_rows(agent: Arc<Agent>, node: Name, mut rx: watch::Receiver<FlowRow>) {
    loop {
        if !agent.directory.has_node(&node) {
            return;
        }
        match crate::dial::dial(&agent, &node, PeerWant::Flows).await {
            Ok(mut stream) => loop {
                let row = rx.borrow_and_update().clone();
                if stream.write_all(&row.encode()).await.is_err() {
                    break;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            },
            Err(e) => debug!(%node, error = %e, "cannot send this node's flows"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Another agent's rows, as they come on its authenticated stream, until it closes; its
/// node's row then no longer counts (unless a newer stream of its has sent one since).
pub async fn receive(agent: &Agent, from: &Name, stream: TcpStream) -> io::Result<()> {
    let Some(pacing) = agent.pacing.as_ref() else {
        return Ok(());
    };
    let mut last: Option<Instant> = None;
    let ended = receive_rows(pacing, from, stream, &mut last).await;
    if let Some(at) = last {
        pacing.drop_row(from, at);
    }
    ended
}

async fn receive_rows(
    pacing: &Pacing,
    from: &Name,
    mut stream: TcpStream,
    last: &mut Option<Instant>,
) -> io::Result<()> {
    loop {
        let mut head = [0u8; 4];
        stream.read_exact(&mut head).await?;
        let n = FlowRow::body_len(&head)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let mut body = vec![0u8; n];
        stream.read_exact(&mut body).await?;
        let row = FlowRow::decode(&body)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let now = Instant::now();
        *last = Some(now);
        pacing.note_row(from, row, now);
    }
}
