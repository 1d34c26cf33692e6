//! The copy loop: moves one direction of a stream from a source socket to a sink socket.
//!
//! It knows nothing of rates or delays; it asks a [`Port`] (the link seam) when each unit
//! of bytes may be written (a [`Release`]) and how many bytes may wait meanwhile
//! ([`Port::window`]), and waits for that moment with a precise timer ([`Sleeper`]). One
//! loop, whatever makes a unit wait. With no window a unit is written before the next is
//! read and stays where it was read: small messages in a lookahead buffer, bulk on Linux
//! socket -> pipe -> socket with splice(2). With a window (a link that adds delay) units
//! are copied out and more is read while they wait.
//!
//! What a unit is follows from where the bytes come from. From an application (a raw
//! source, the egress side) each chunk read is a unit (at most [`Port::unit`]), and it
//! is *backlogged* when it was read without waiting, behind the previous one. From another
//! agent (a framed source, the ingress side) a frame is one unit, paced when its header
//! arrives: the sending agent paced it out whole.
//!
//! Legs between two agents are *framed* (`throttle_proto::wire::frame_header`): each chunk
//! is preceded by its length and by how late the sender's pacing let it go, and a zero
//! length marks the clean end of the direction. A peer agent that dies mid-stream
//! therefore shows as an error here (no end marker) instead of a silent, short EOF; the
//! caller then resets the local connection so the application sees the failure.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use super::socket::{self, Pipe, Socket};
use super::timer::Sleeper;
use crate::link::{Port, Ready, Release, MAX_WAIT};
use throttle_proto::wire::{frame_header, parse_frame_header, FRAME_HEADER_LEN};

/// How a leg carries bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Plain bytes (an application's socket).
    Raw,
    /// Length-prefixed chunks with an end marker (agent to agent).
    Framed,
}

/// Tunables of the copy loop.
#[derive(Clone, Copy, Debug)]
pub struct PumpOptions {
    /// Use splice(2) where possible.
    pub splice: bool,
    /// Pipe size to ask for, and the largest chunk moved at once.
    pub chunk: usize,
}

impl Default for PumpOptions {
    fn default() -> Self {
        PumpOptions {
            splice: cfg!(target_os = "linux"),
            chunk: 256 * 1024,
        }
    }
}

/// Size of the lookahead buffer: reads of at most this size go through memory (one read,
/// one write per message); a read that fills it switches the direction to splice.
const LOOKAHEAD: usize = 16 * 1024;

/// The reading side of one direction: a small lookahead buffer, and frame tracking on a
/// framed leg. Bytes in the lookahead are not yet scheduled: without a window the copy
/// loop reads at most [`LOOKAHEAD`] bytes ahead of what the link let go; with one, the
/// units held besides (at most [`Port::window`] bytes).
struct Reader<'a, S> {
    sock: &'a S,
    framing: Framing,
    /// Bytes left in the current frame (framed legs).
    remaining: usize,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    ended: bool,
    /// A frame began whose length the pacer has not seen yet (framed legs).
    /// (with the sender's lateness, which the receiving pacer credits).
    new_frame: Option<(usize, Duration)>,
    /// The reader had to wait for bytes since the last unit was scheduled: the stream
    /// went idle, so the next unit is not backlogged.
    waited: bool,
    /// When the bytes that ended that wait arrived at the socket (its arrival stamp): the
    /// agent may have run later than that.
    arrived: Option<Instant>,
}

impl<'a, S: Socket> Reader<'a, S> {
    fn new(sock: &'a S, framing: Framing) -> Self {
        Reader {
            sock,
            framing,
            remaining: 0,
            buf: Vec::new(),
            start: 0,
            end: 0,
            ended: false,
            new_frame: None,
            waited: true,
            arrived: None,
        }
    }

    /// Whether the bytes about to be scheduled were waiting behind the previous unit, and
    /// if not, when they arrived; resets the account for the next unit.
    fn readiness(&mut self) -> Ready {
        let arrived = self.arrived.take();
        if std::mem::replace(&mut self.waited, false) {
            Ready::Arrived(arrived)
        } else {
            Ready::Backlogged
        }
    }

    fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Read once from the socket into the lookahead; returns the bytes read (0 = EOF).
    /// Cancel-safe: whatever was read is kept in `self`.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.buf.is_empty() {
            self.buf = vec![0u8; LOOKAHEAD];
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let (read, waited) =
            waits(socket::read_stamped(self.sock, &mut self.buf[self.end..])).await;
        let (n, stamp) = read?;
        self.waited |= waited;
        if self.waited && self.arrived.is_none() {
            self.arrived = stamp.map(instant_of);
        }
        self.end += n;
        Ok(n)
    }

    /// How many payload bytes may be read before the next frame boundary; 0 at the clean
    /// end. Cancel-safe.
    async fn budget(&mut self) -> io::Result<usize> {
        if self.ended {
            return Ok(0);
        }
        if self.framing == Framing::Raw {
            return Ok(usize::MAX);
        }
        while self.remaining == 0 {
            while self.buffered() < FRAME_HEADER_LEN {
                if self.fill().await? == 0 {
                    return Err(peer_vanished());
                }
            }
            let mut h = [0u8; FRAME_HEADER_LEN];
            h.copy_from_slice(&self.buf[self.start..self.start + FRAME_HEADER_LEN]);
            let (len, late) = parse_frame_header(&h);
            self.start += FRAME_HEADER_LEN;
            if len == 0 {
                self.ended = true;
                return Ok(0);
            }
            self.remaining = len as usize;
            self.new_frame = Some((len as usize, late));
        }
        Ok(self.remaining)
    }

    /// Take up to `n` payload bytes from the lookahead.
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.buffered());
        if self.framing == Framing::Framed {
            self.remaining -= n;
        }
        let s = self.start;
        self.start += n;
        &self.buf[s..s + n]
    }

    /// Account for `n` bytes spliced straight from the socket; `n == 0` is end of input.
    fn consumed(&mut self, n: usize) -> io::Result<()> {
        if n == 0 {
            if self.framing == Framing::Framed {
                return Err(peer_vanished());
            }
            self.ended = true;
        } else if self.framing == Framing::Framed {
            self.remaining -= n;
        }
        Ok(())
    }

    /// Read more into the lookahead; at end of input mark the end (raw) or fail (framed).
    async fn fill_or_end(&mut self) -> io::Result<usize> {
        let n = self.fill().await?;
        if n == 0 {
            self.consumed(0)?;
        }
        Ok(n)
    }
}

/// The moment on the monotonic clock of a wall-clock stamp from the kernel (never later
/// than now).
fn instant_of(stamp: std::time::SystemTime) -> Instant {
    let now = Instant::now();
    match std::time::SystemTime::now().duration_since(stamp) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(now),
        Err(_) => now,
    }
}

/// Run `fut`; also say whether it had to wait (was not ready when first polled).
async fn waits<F: Future>(fut: F) -> (F::Output, bool) {
    let mut fut = std::pin::pin!(fut);
    let mut first = true;
    std::future::poll_fn(|cx| {
        let polled = fut.as_mut().poll(cx);
        let waited = !std::mem::replace(&mut first, false);
        polled.map(|out| (out, waited))
    })
    .await
}

fn peer_vanished() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the peer agent closed the stream without its end marker (agent died or was reset)",
    )
}

/// Writes chunks to the sink; on a framed leg header and payload go out in one write.
struct Writer<'a, S> {
    sock: &'a S,
    framing: Framing,
    scratch: Vec<u8>,
}

impl<'a, S: Socket> Writer<'a, S> {
    fn new(sock: &'a S, framing: Framing) -> Self {
        Writer {
            sock,
            framing,
            scratch: Vec::new(),
        }
    }

    /// Write one chunk that left its pacing `late` (on a framed leg the header says so).
    async fn chunk(&mut self, data: &[u8], late: Duration) -> io::Result<()> {
        if self.framing == Framing::Raw {
            return socket::write_all(self.sock, data).await;
        }
        let header = frame_header(data.len() as u32, late);
        if data.len() <= LOOKAHEAD {
            self.scratch.clear();
            self.scratch.extend_from_slice(&header);
            self.scratch.extend_from_slice(data);
            return socket::write_all(self.sock, &self.scratch).await;
        }
        socket::write_all_more(self.sock, &header).await?;
        socket::write_all(self.sock, data).await
    }

    /// End the direction: end marker on a framed leg, then half-close.
    async fn finish(&mut self) -> io::Result<()> {
        if self.framing == Framing::Framed {
            socket::write_all(self.sock, &frame_header(0, Duration::ZERO)).await?;
        }
        socket::shutdown_write(self.sock);
        Ok(())
    }
}

/// One stream direction's use of its port: schedules units, waits for their releases,
/// and reports how late they left.
struct Pacing<'a> {
    port: &'a Port,
    sleeper: Sleeper,
    /// How far behind its schedule the last paced unit left: if the burst ends there, the
    /// message it ended arrived that late.
    lag: Duration,
}

impl<'a> Pacing<'a> {
    fn new(port: &'a Port) -> Self {
        Pacing {
            port,
            sleeper: Sleeper::new(),
            lag: Duration::ZERO,
        }
    }

    /// When `bytes` may be written, and whether they begin a new burst (they were not
    /// backlogged: the burst before ended with the unit written before them, whose lag
    /// [`Pacing::end_burst`] reports).
    fn schedule(&mut self, bytes: usize, ready: Ready) -> (Release, bool) {
        (self.port.schedule(bytes, ready), ready != Ready::Backlogged)
    }

    /// Wait until `r` is due (rescheduled if the rate changes meanwhile); a paced unit's
    /// lateness becomes the lag, and counts as a wait when the copy loop slept for it
    /// here or before (`waited`: a held unit's timer).
    async fn wait(&mut self, mut r: Release, waited: bool) {
        let mut slept = waited;
        loop {
            self.port.refresh(&mut r);
            let now = Instant::now();
            let due = r.due();
            if due <= now {
                break;
            }
            let until = due.min(now + MAX_WAIT);
            self.sleeper.until(until).await;
            slept = true;
            if until == due {
                break;
            }
        }
        if r.paced() {
            let late = Instant::now().saturating_duration_since(r.due());
            if slept {
                self.port.departed(&r);
            }
            self.lag = late;
        }
    }

    async fn depart(&mut self, bytes: usize, ready: Ready) {
        let (r, new_burst) = self.schedule(bytes, ready);
        if new_burst {
            self.end_burst();
        }
        self.wait(r, false).await;
    }

    fn end_burst(&mut self) {
        self.port.fell_behind(std::mem::take(&mut self.lag));
    }
}

impl Drop for Pacing<'_> {
    fn drop(&mut self) {
        self.end_burst();
    }
}

/// Where the bytes of a unit wait between being read and being written.
enum Bytes {
    /// At the head of the reader's lookahead: nothing more is read until they go.
    Lookahead(usize),
    /// In the pipe, spliced from the source: nothing more is read until they go.
    Piped(usize),
    /// Copied out of the lookahead: more may be read while they wait (the link's
    /// [`Port::window`] allows it).
    Owned(Vec<u8>),
}

impl Bytes {
    fn len(&self) -> usize {
        match self {
            Bytes::Lookahead(n) | Bytes::Piped(n) => *n,
            Bytes::Owned(v) => v.len(),
        }
    }
}

/// A unit read and scheduled: its bytes and when the link lets them be written.
struct Unit {
    bytes: Bytes,
    release: Release,
    /// It was not backlogged: the burst before it ended with the unit before it.
    starts_burst: bool,
    /// The last unit of its burst (one that starts the next was read while it waited):
    /// the burst's lateness is its own, known when it is written.
    ends_burst: bool,
}

impl Unit {
    fn new(bytes: Bytes, (release, starts_burst): (Release, bool)) -> Unit {
        Unit {
            bytes,
            release,
            starts_burst,
            ends_burst: false,
        }
    }
}

/// Units read and not yet written, in order (the link delays, it never reorders).
#[derive(Default)]
struct Held {
    units: VecDeque<Unit>,
    bytes: usize,
}

impl Held {
    /// Queue `u`. If it starts a burst, the burst before ends with the unit written
    /// before it: the last one held (marked, reported when it is written), or, with none
    /// held, the one written last (reported now).
    fn push(&mut self, mut u: Unit, pacing: Option<&mut Pacing<'_>>) {
        if std::mem::take(&mut u.starts_burst) {
            match (self.units.back_mut(), pacing) {
                (Some(last), _) => last.ends_burst = true,
                (None, Some(p)) => p.end_burst(),
                (None, None) => {}
            }
        }
        self.bytes += u.bytes.len();
        self.units.push_back(u);
    }

    fn pop(&mut self) -> Option<Unit> {
        let u = self.units.pop_front()?;
        self.bytes -= u.bytes.len();
        Some(u)
    }

    /// Whether another unit may be read now, with `window` bytes allowed to wait: only
    /// units copied out of the lookahead may wait while more is read.
    fn room(&self, window: usize) -> bool {
        match self.units.front() {
            None => true,
            Some(u) => matches!(u.bytes, Bytes::Owned(_)) && self.bytes < window,
        }
    }
}

/// Copy one direction until its clean end. Returns the payload bytes moved.
///
/// `port` is the link direction that paces it (`None`: unshaped, e.g. same-node streams).
/// Every unit read is scheduled on the port and written when its [`Release`] is due;
/// how many bytes may wait meanwhile is the port's [`Port::window`]. With no window (no
/// added delay) a unit goes before the next is read and stays where it was read: small
/// messages in the lookahead (one read, one write), and once a read fills it, spliced
/// through a pipe until a splice comes back short. With a window, units are copied out
/// and read while earlier ones wait for their moment.
pub async fn pump<A: Socket, B: Socket>(
    src: &A,
    src_framing: Framing,
    dst: &B,
    dst_framing: Framing,
    port: Option<&Port>,
    opts: PumpOptions,
) -> io::Result<u64> {
    let mut reader = Reader::new(src, src_framing);
    let mut writer = Writer::new(dst, dst_framing);
    let mut pacing = port.map(Pacing::new);
    if port.is_some() {
        socket::stamp_arrivals(src);
    }
    let mut lane = Lane::default();
    let mut held = Held::default();
    // Wakes the loop when the oldest unit waiting beside reads is due.
    let mut head_timer = Sleeper::new();
    let mut total = 0u64;
    loop {
        let window = port.map_or(0, Port::window);
        if reader.ended || !held.room(window) {
            let Some(unit) = held.pop() else { break };
            total += lane
                .release(unit, &mut reader, &mut writer, pacing.as_mut(), false)
                .await?;
            continue;
        }
        let owned = window > 0;
        let Some(head) = held.units.front().map(|u| u.release.due()) else {
            if let Some(u) = lane
                .next_unit(&mut reader, pacing.as_mut(), owned, opts)
                .await?
            {
                held.push(u, pacing.as_mut());
            }
            continue;
        };
        // Units wait while more is read: whichever comes first (the read is cancel-safe).
        tokio::select! {
            biased;
            _ = head_timer.until(head) => {
                if let Some(unit) = held.pop() {
                    total += lane.release(unit, &mut reader, &mut writer, pacing.as_mut(), true).await?;
                }
            }
            u = lane.next_unit(&mut reader, pacing.as_mut(), owned, opts) => {
                if let Some(u) = u? {
                    held.push(u, pacing.as_mut());
                }
            }
        }
    }
    writer.finish().await?;
    Ok(total)
}

/// How a direction moves bytes it may leave where they are: its pipe (made on first use)
/// and whether reads go straight to it.
#[derive(Default)]
struct Lane {
    pipe: Option<Pipe>,
    /// The last read filled the lookahead (or a splice came back full): splice next.
    bulk: bool,
}

impl Lane {
    /// Read the next unit and schedule it; `None` at the end of input (`reader.ended`).
    /// `owned`: copy it out of the lookahead (it may wait while more is read); never
    /// splice then. Cancel-safe when `owned`: bytes read wait in the lookahead and the
    /// schedule is made only right before the (synchronous) take.
    async fn next_unit<A: Socket>(
        &mut self,
        reader: &mut Reader<'_, A>,
        mut pacing: Option<&mut Pacing<'_>>,
        owned: bool,
        opts: PumpOptions,
    ) -> io::Result<Option<Unit>> {
        // Units are chunks read from an application, or whole frames from another agent.
        // A frame is scheduled when its header arrives; where bytes stay where they are
        // read, an empty unit waits for its release before any of its body is read (it
        // streams in meanwhile, and is then spliced whole); copied out, its first bytes
        // carry the release.
        let per_chunk = reader.framing == Framing::Raw;
        loop {
            let budget = reader.budget().await?;
            if budget == 0 {
                return Ok(None);
            }
            if !owned {
                if let (Some((len, late)), Some(p)) = (reader.new_frame.take(), pacing.as_mut()) {
                    let scheduled = p.schedule(len, frame_readiness(reader.readiness(), late));
                    return Ok(Some(Unit::new(Bytes::Lookahead(0), scheduled)));
                }
            }
            let unit = match pacing.as_ref() {
                Some(p) if per_chunk => p.port.unit(),
                _ => usize::MAX,
            };
            if reader.buffered() > 0 {
                let n = budget.min(reader.buffered()).min(unit).min(opts.chunk);
                let scheduled = release_of(reader, pacing.as_deref_mut(), n);
                let bytes = if owned {
                    Bytes::Owned(reader.take(n).to_vec())
                } else {
                    Bytes::Lookahead(n)
                };
                return Ok(Some(Unit::new(bytes, scheduled)));
            }
            if owned || !(self.bulk && opts.splice) {
                let n = reader.fill_or_end().await?;
                self.bulk = n == LOOKAHEAD;
                continue;
            }
            let p = match &mut self.pipe {
                Some(p) => p,
                none => none.insert(Pipe::new(opts.chunk)?),
            };
            let want = budget.min(p.capacity()).min(unit);
            let (n, waited) = waits(socket::splice_in(reader.sock, p, want)).await;
            let n = n?;
            reader.waited |= waited;
            reader.consumed(n)?;
            if n == 0 {
                return Ok(None);
            }
            // A paced direction that drained its source goes back to the lookahead: what
            // comes next starts a new burst, and the lookahead's read brings its arrival
            // stamp.
            self.bulk = if pacing.is_some() {
                n == want
            } else {
                n >= LOOKAHEAD
            };
            let scheduled = release_of(reader, pacing.as_deref_mut(), n);
            return Ok(Some(Unit::new(Bytes::Piped(n), scheduled)));
        }
    }

    /// Wait for `unit`'s release (`waited`: the loop slept for it already), then write
    /// it; returns its bytes.
    async fn release<A: Socket, B: Socket>(
        &mut self,
        unit: Unit,
        reader: &mut Reader<'_, A>,
        writer: &mut Writer<'_, B>,
        mut pacing: Option<&mut Pacing<'_>>,
        waited: bool,
    ) -> io::Result<u64> {
        if let Some(p) = pacing.as_deref_mut() {
            p.wait(unit.release, waited).await;
            if unit.ends_burst {
                p.end_burst();
            }
            p.port.record(unit.bytes.len());
        }
        let lag = pacing.map(|p| p.lag).unwrap_or_default();
        let n = unit.bytes.len();
        if n == 0 {
            // A frame's release, its body not read yet: nothing to write.
            return Ok(0);
        }
        match unit.bytes {
            Bytes::Lookahead(n) => writer.chunk(reader.take(n), lag).await?,
            Bytes::Owned(data) => writer.chunk(&data, lag).await?,
            Bytes::Piped(n) => {
                let p = self
                    .pipe
                    .as_ref()
                    .ok_or_else(|| io::Error::other("pipe missing"))?;
                if writer.framing == Framing::Framed {
                    socket::write_all_more(writer.sock, &frame_header(n as u32, lag)).await?;
                }
                socket::splice_out(p, writer.sock, n).await?;
            }
        }
        Ok(n as u64)
    }
}

/// When `n` bytes just read may be written, and whether they start a burst: scheduled
/// on their own (a chunk from an application), with the frame they begin (copied out),
/// or carried (the rest of a frame; unshaped).
fn release_of<A: Socket>(
    reader: &mut Reader<'_, A>,
    pacing: Option<&mut Pacing<'_>>,
    n: usize,
) -> (Release, bool) {
    let Some(p) = pacing else {
        return (Release::now(), false);
    };
    if reader.framing == Framing::Raw {
        return p.schedule(n, reader.readiness());
    }
    match reader.new_frame.take() {
        Some((len, late)) => p.schedule(len, frame_readiness(reader.readiness(), late)),
        None => (p.port.carry(), false),
    }
}

/// When a frame from another agent was ready: it arrived when it did, but its sender let
/// it go `late` after its departure, so the link had carried it that much earlier. A
/// backlogged frame needs no arrival (the pacer credits its backlog).
fn frame_readiness(ready: Ready, late: Duration) -> Ready {
    match ready {
        Ready::Backlogged => Ready::Backlogged,
        Ready::Arrived(arrived) => {
            let arrived = arrived.unwrap_or_else(Instant::now);
            Ready::Arrived(Some(arrived.checked_sub(late).unwrap_or(arrived)))
        }
    }
}

/// Run both directions of a stream between `local` (an application, raw bytes) and
/// `remote`. If either direction fails, both sockets are closed abortively so each end
/// sees an error rather than a clean end.
pub async fn bridge<L: Socket, R: Socket>(
    local: &L,
    remote: &R,
    remote_framing: Framing,
    ports: Option<(&Port, &Port)>,
    opts: PumpOptions,
) -> io::Result<(u64, u64)> {
    let (out_port, in_port) = match ports {
        Some((egress, ingress)) => (Some(egress), Some(ingress)),
        None => (None, None),
    };
    let outbound = pump(local, Framing::Raw, remote, remote_framing, out_port, opts);
    let inbound = pump(remote, remote_framing, local, Framing::Raw, in_port, opts);
    match tokio::try_join!(outbound, inbound) {
        Ok(v) => Ok(v),
        Err(e) => {
            local.set_abortive_close();
            remote.set_abortive_close();
            Err(e)
        }
    }
}

/// Calibration source: send `duration` worth of zeros through `port` as framed chunks.
pub async fn send_zeros<S: Socket>(sink: &S, port: &Port, duration: Duration) -> io::Result<u64> {
    let zeros = vec![0u8; 256 * 1024];
    let end = Instant::now() + duration;
    let mut total = 0u64;
    let mut writer = Writer::new(sink, Framing::Framed);
    let mut pacing = Pacing::new(port);
    while Instant::now() < end {
        let n = zeros.len().min(port.unit());
        // Always backlogged after the first: the zeros are always there.
        let ready = if total > 0 {
            Ready::Backlogged
        } else {
            Ready::Arrived(None)
        };
        pacing.depart(n, ready).await;
        port.record(n);
        writer.chunk(&zeros[..n], pacing.lag).await?;
        total += n as u64;
    }
    writer.finish().await?;
    Ok(total)
}

/// Calibration sink: read framed chunks through `port` and discard them.
/// Returns (bytes, seconds from first to last byte).
pub async fn discard<S: Socket>(src: &S, port: &Port) -> io::Result<(u64, f64)> {
    let mut reader = Reader::new(src, Framing::Framed);
    let mut pacing = Pacing::new(port);
    let mut lane = Lane::default();
    let opts = PumpOptions::default();
    let mut total = 0u64;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    while let Some(unit) = lane
        .next_unit(&mut reader, Some(&mut pacing), true, opts)
        .await?
    {
        if unit.starts_burst {
            pacing.end_burst();
        }
        pacing.wait(unit.release, false).await;
        port.record(unit.bytes.len());
        first.get_or_insert_with(Instant::now);
        last = Instant::now();
        total += unit.bytes.len() as u64;
    }
    let secs = first.map(|f| (last - f).as_secs_f64()).unwrap_or(0.0);
    Ok((total, secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(bytes: Bytes) -> Unit {
        Unit::new(bytes, (Release::now(), false))
    }

    /// Bytes left in the lookahead or the pipe are where the next read would put its own:
    /// while they wait nothing is read, whatever the window; copies may wait beside reads
    /// up to the window.
    #[test]
    fn only_copied_units_wait_while_more_is_read() {
        let mut held = Held::default();
        assert!(held.room(0), "an empty direction reads");
        held.push(unit(Bytes::Lookahead(100)), None);
        assert!(!held.room(0) && !held.room(1 << 20));
        held.pop();
        held.push(unit(Bytes::Piped(100)), None);
        assert!(!held.room(1 << 20));
        held.pop();
        held.push(unit(Bytes::Owned(vec![0; 100])), None);
        assert!(!held.room(0), "no window: the unit goes first");
        assert!(held.room(101) && !held.room(100));
        held.push(unit(Bytes::Owned(vec![0; 50])), None);
        assert_eq!(held.bytes, 150);
        assert_eq!(held.pop().map(|u| u.bytes.len()), Some(100), "in order");
        assert_eq!(held.bytes, 50);
    }

    /// A unit that starts a burst while others wait ends the burst with the last of them
    /// (its lateness is reported when it is written, not the lateness of one written
    /// earlier).
    #[test]
    fn a_new_burst_marks_the_last_unit_held_as_the_end_of_the_one_before() {
        let mut held = Held::default();
        held.push(unit(Bytes::Owned(vec![0; 10])), None);
        held.push(unit(Bytes::Owned(vec![0; 10])), None);
        let mut first = unit(Bytes::Owned(vec![0; 10]));
        first.starts_burst = true;
        held.push(first, None);
        let ends: Vec<bool> = held.units.iter().map(|u| u.ends_burst).collect();
        assert_eq!(ends, [false, true, false]);
        assert!(held.units.iter().all(|u| !u.starts_burst));
    }
}
