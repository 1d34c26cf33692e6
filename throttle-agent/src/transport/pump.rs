//! The copy loop: moves one direction of a stream from a source socket to a sink socket.
//!
//! It knows nothing of rates or delays; it asks a [`Port`] (the link seam) when each unit
//! of bytes may leave and how long a chunk must be held, and waits for that moment with a
//! precise timer ([`Sleeper`]). On Linux the bytes go socket -> pipe -> socket with
//! splice(2): a unit is spliced into the pipe, held there until its departure, then
//! spliced out. When the port asks for added delay (or splice is off) chunks are read into
//! memory and released at their time.
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
use crate::link::{Departure, Port, Ready, MAX_WAIT};
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
/// framed leg. Bytes in the lookahead are not yet paid for: the port is charged when they
/// move on to the sink, so shaping holds them at most [`LOOKAHEAD`] bytes ahead.
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

/// One stream direction's use of its port: schedules units, waits for their departures,
/// and reports how late they left.
struct Pacing<'a> {
    port: &'a Port,
    sleeper: Sleeper,
    /// How far behind its schedule the last unit left: if the burst ends there, the
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

    /// When `bytes` may leave. A unit that was not backlogged begins a new burst: the one
    /// before ended with the last unit's lag.
    fn schedule(&mut self, bytes: usize, ready: Ready) -> Departure {
        if ready != Ready::Backlogged {
            self.end_burst();
        }
        self.port.schedule(bytes, ready)
    }

    /// Wait until `d` may leave (rescheduled if the rate changes meanwhile).
    async fn wait(&mut self, mut d: Departure) {
        let mut slept = false;
        loop {
            self.port.refresh(&mut d);
            let now = Instant::now();
            if d.at <= now {
                break;
            }
            let until = d.at.min(now + MAX_WAIT);
            self.sleeper.until(until).await;
            slept = true;
            if until == d.at {
                break;
            }
        }
        if slept {
            self.port.departed(&d);
        }
        self.lag = Instant::now().saturating_duration_since(d.at);
    }

    async fn depart(&mut self, bytes: usize, ready: Ready) {
        let d = self.schedule(bytes, ready);
        self.wait(d).await;
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

/// Copy one direction until its clean end. Returns the payload bytes moved.
///
/// `port` is the link direction that paces it (`None`: unshaped, e.g. same-node streams).
/// Small messages go through the lookahead (one read, one write); once a read fills it,
/// the direction switches to splice(2) until a splice comes back short.
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
    let mut pipe: Option<Pipe> = None;
    let mut bulk = false;
    let mut total = 0u64;
    // Units are chunks read from an application, or whole frames from another agent.
    let per_chunk = src_framing == Framing::Raw;
    loop {
        let delay = port.map(|p| p.delay()).unwrap_or_default();
        if !delay.is_zero() {
            total += delayed(&mut reader, &mut writer, pacing.as_mut(), opts).await?;
            if reader.ended {
                break;
            }
            continue;
        }
        let budget = reader.budget().await?;
        if budget == 0 {
            break;
        }
        if let (Some((frame, late)), Some(pacing)) = (reader.new_frame.take(), pacing.as_mut()) {
            let ready = frame_readiness(reader.readiness(), late);
            pacing.depart(frame, ready).await;
        }
        let unit = match pacing.as_ref() {
            Some(p) if per_chunk => p.port.unit(),
            _ => usize::MAX,
        };
        if reader.buffered() > 0 {
            let n = budget.min(reader.buffered()).min(unit);
            if let (true, Some(pacing)) = (per_chunk, pacing.as_mut()) {
                let ready = reader.readiness();
                pacing.depart(n, ready).await;
            }
            let data = reader.take(n);
            record(port, data.len());
            total += data.len() as u64;
            writer.chunk(data, lag_of(&pacing)).await?;
            continue;
        }
        if !(bulk && opts.splice) {
            let n = reader.fill_or_end().await?;
            bulk = n == LOOKAHEAD;
            continue;
        }
        if pipe.is_none() {
            pipe = Some(Pipe::new(opts.chunk)?);
        }
        let p = pipe
            .as_ref()
            .ok_or_else(|| io::Error::other("pipe missing"))?;
        let want = budget.min(p.capacity()).min(unit);
        let (n, waited) = waits(socket::splice_in(src, p, want)).await;
        let n = n?;
        reader.waited |= waited;
        reader.consumed(n)?;
        if n == 0 {
            break;
        }
        // A paced direction that drained its source goes back to the lookahead: what comes
        // next starts a new burst, and the lookahead's read brings its arrival stamp.
        bulk = if pacing.is_some() {
            n == want
        } else {
            n >= LOOKAHEAD
        };
        if let (true, Some(pacing)) = (per_chunk, pacing.as_mut()) {
            let ready = reader.readiness();
            pacing.depart(n, ready).await;
        }
        record(port, n);
        if dst_framing == Framing::Framed {
            socket::write_all_more(dst, &frame_header(n as u32, lag_of(&pacing))).await?;
        }
        socket::splice_out(p, dst, n).await?;
        total += n as u64;
    }
    writer.finish().await?;
    Ok(total)
}

/// How late the unit just departed left (zero when unpaced).
fn lag_of(pacing: &Option<Pacing<'_>>) -> Duration {
    pacing.as_ref().map(|p| p.lag).unwrap_or_default()
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

fn record(port: Option<&Port>, n: usize) {
    if let Some(p) = port {
        p.record(n);
    }
}

/// Copy with added delay: chunks are read as fast as the queue allows, scheduled on the
/// port, held until their departure plus the delay, and written then. Returns when the
/// delay is switched off and the queue has drained, or at the end of input (with
/// `reader.ended` set).
async fn delayed<A: Socket, B: Socket>(
    reader: &mut Reader<'_, A>,
    writer: &mut Writer<'_, B>,
    mut pacing: Option<&mut Pacing<'_>>,
    opts: PumpOptions,
) -> io::Result<u64> {
    let port = pacing.as_ref().map(|p| p.port);
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut queued = 0usize;
    let mut total = 0u64;
    let mut sleeper = Sleeper::new();
    enum Event {
        Due,
        Read(io::Result<(Vec<u8>, Option<Departure>)>),
    }
    loop {
        let delay = port.map(|p| p.delay()).unwrap_or_default();
        if queue.is_empty() && (reader.ended || delay.is_zero()) {
            return Ok(total);
        }
        let limit = port.map_or(1 << 20, Port::in_flight_limit);
        let can_read = !reader.ended && queued < limit && !delay.is_zero();
        let head = queue.front().map(|(t, _)| *t);
        let event = tokio::select! {
            biased;
            _ = sleep_until_opt(&mut sleeper, head), if head.is_some() => Event::Due,
            r = read_chunk(reader, pacing.as_deref_mut(), opts.chunk), if can_read => Event::Read(r),
        };
        match event {
            Event::Due => {
                if let Some((due, data)) = queue.pop_front() {
                    queued -= data.len();
                    let late = Instant::now().saturating_duration_since(due);
                    writer.chunk(&data, late).await?;
                    total += data.len() as u64;
                    if let Some(p) = pacing.as_deref_mut() {
                        // The burst ends when the queue runs dry: its last chunk's lag.
                        p.lag = late;
                        if queue.is_empty() {
                            p.end_burst();
                        }
                    }
                }
            }
            Event::Read(r) => {
                let (data, departure) = r?;
                if !data.is_empty() {
                    let due = match port {
                        Some(p) => p.arrives(departure.map(|d| d.at)),
                        None => Instant::now() + delay,
                    };
                    queued += data.len();
                    queue.push_back((due, data));
                }
            }
        }
    }
}

async fn sleep_until_opt(sleeper: &mut Sleeper, t: Option<Instant>) {
    match t {
        Some(t) => sleeper.until(t).await,
        None => std::future::pending().await,
    }
}

/// Read one chunk into memory and schedule it on the port (without waiting for its
/// departure). Empty at the end of input. On a framed source the departure comes with the
/// first chunk of each frame (the frame is the unit). Cancel-safe: bytes read wait in the
/// lookahead; the schedule is made only right before the (synchronous) take.
async fn read_chunk<A: Socket>(
    reader: &mut Reader<'_, A>,
    pacing: Option<&mut Pacing<'_>>,
    chunk: usize,
) -> io::Result<(Vec<u8>, Option<Departure>)> {
    loop {
        let budget = reader.budget().await?;
        if budget == 0 {
            return Ok((Vec::new(), None));
        }
        if reader.buffered() == 0 {
            reader.fill_or_end().await?;
            continue;
        }
        let per_chunk = reader.framing == Framing::Raw;
        let port = pacing.as_ref().map(|p| p.port);
        let unit = match port {
            Some(p) if per_chunk => p.unit(),
            _ => usize::MAX,
        };
        let n = budget.min(reader.buffered()).min(chunk).min(unit);
        let departure = match pacing {
            Some(pacing) if per_chunk => Some(pacing.schedule(n, reader.readiness())),
            Some(pacing) => reader.new_frame.take().map(|(frame, late)| {
                pacing.schedule(frame, frame_readiness(reader.readiness(), late))
            }),
            None => None,
        };
        let data = reader.take(n).to_vec();
        record(port, data.len());
        return Ok((data, departure));
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
        record(Some(port), n);
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
    let mut total = 0u64;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    loop {
        let (chunk, departure) = read_chunk(&mut reader, Some(&mut pacing), 256 * 1024).await?;
        if chunk.is_empty() {
            break;
        }
        if let Some(d) = departure {
            pacing.wait(d).await;
        }
        first.get_or_insert_with(Instant::now);
        last = Instant::now();
        total += chunk.len() as u64;
    }
    let secs = first.map(|f| (last - f).as_secs_f64()).unwrap_or(0.0);
    Ok((total, secs))
}
