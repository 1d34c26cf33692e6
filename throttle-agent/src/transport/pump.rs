//! The copy loop: moves one direction of a stream from a source socket to a sink socket.
//!
//! It knows nothing of rates or delays; it asks a [`Port`] (the link seam) how many bytes
//! may pass and how long a chunk must be held. On Linux the bytes go socket -> pipe ->
//! socket with splice(2), each splice capped at the tokens granted; when the port asks for
//! added delay (or splice is off) chunks are read into memory and released at their time.
//!
//! Legs between two agents are *framed*: each chunk is preceded by its length (u32 BE) and
//! a zero length marks the clean end of the direction. A peer agent that dies mid-stream
//! therefore shows as an error here (no end marker) instead of a silent, short EOF; the
//! caller then resets the local connection so the application sees the failure.

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use tokio::time::Instant;

use super::socket::{self, Pipe, Socket};
use crate::link::Port;

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
        let n = socket::read_some(self.sock, &mut self.buf[self.end..]).await?;
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
            while self.buffered() < 4 {
                if self.fill().await? == 0 {
                    return Err(peer_vanished());
                }
            }
            let h = &self.buf[self.start..self.start + 4];
            let len = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize;
            self.start += 4;
            if len == 0 {
                self.ended = true;
                return Ok(0);
            }
            self.remaining = len;
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

    async fn chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if self.framing == Framing::Raw {
            return socket::write_all(self.sock, data).await;
        }
        if data.len() <= LOOKAHEAD {
            self.scratch.clear();
            self.scratch
                .extend_from_slice(&(data.len() as u32).to_be_bytes());
            self.scratch.extend_from_slice(data);
            return socket::write_all(self.sock, &self.scratch).await;
        }
        socket::write_all_more(self.sock, &(data.len() as u32).to_be_bytes()).await?;
        socket::write_all(self.sock, data).await
    }

    /// End the direction: end marker on a framed leg, then half-close.
    async fn finish(&mut self) -> io::Result<()> {
        if self.framing == Framing::Framed {
            socket::write_all(self.sock, &0u32.to_be_bytes()).await?;
        }
        socket::shutdown_write(self.sock);
        Ok(())
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
    let mut pipe: Option<Pipe> = None;
    let mut bulk = false;
    let mut total = 0u64;
    loop {
        let delay = port.map(|p| p.delay()).unwrap_or_default();
        if !delay.is_zero() {
            total += delayed(&mut reader, &mut writer, port, opts).await?;
            if reader.ended {
                break;
            }
            continue;
        }
        let budget = reader.budget().await?;
        if budget == 0 {
            break;
        }
        if reader.buffered() > 0 {
            let want = budget.min(reader.buffered());
            let grant = match port {
                Some(port) => port.grant(want).await,
                None => want,
            };
            let data = reader.take(grant);
            record(port, data.len());
            total += data.len() as u64;
            writer.chunk(data).await?;
            continue;
        }
        if !(bulk && opts.splice) {
            let n = reader.fill_or_end().await?;
            bulk = n == LOOKAHEAD;
            continue;
        }
        src.readable().await?;
        if pipe.is_none() {
            pipe = Some(Pipe::new(opts.chunk)?);
        }
        let p = pipe
            .as_ref()
            .ok_or_else(|| io::Error::other("pipe missing"))?;
        let want = budget.min(p.capacity());
        let grant = match port {
            Some(port) => port.grant(want).await,
            None => want,
        };
        let n = match socket::splice_in(src, p, grant).await {
            Ok(n) => n,
            Err(e) => {
                refund(port, grant);
                return Err(e);
            }
        };
        refund(port, grant - n);
        reader.consumed(n)?;
        if n == 0 {
            break;
        }
        bulk = n >= LOOKAHEAD;
        record(port, n);
        if dst_framing == Framing::Framed {
            socket::write_all_more(dst, &(n as u32).to_be_bytes()).await?;
        }
        socket::splice_out(p, dst, n).await?;
        total += n as u64;
    }
    writer.finish().await?;
    Ok(total)
}

fn refund(port: Option<&Port>, n: usize) {
    if let Some(p) = port {
        p.refund(n);
    }
}

fn record(port: Option<&Port>, n: usize) {
    if let Some(p) = port {
        p.record(n);
    }
}

/// Copy with added delay: chunks are read (and charged) as the bucket allows, held in a
/// queue, and written when their time comes. Returns when the delay is switched off and
/// the queue has drained, or at the end of input (with `reader.ended` set).
async fn delayed<A: Socket, B: Socket>(
    reader: &mut Reader<'_, A>,
    writer: &mut Writer<'_, B>,
    port: Option<&Port>,
    opts: PumpOptions,
) -> io::Result<u64> {
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut queued = 0usize;
    let mut total = 0u64;
    enum Event {
        Due,
        Read(io::Result<Vec<u8>>),
    }
    loop {
        let delay = port.map(|p| p.delay()).unwrap_or_default();
        if queue.is_empty() && (reader.ended || delay.is_zero()) {
            return Ok(total);
        }
        let rate = port.and_then(|p| p.rate_limit()).unwrap_or(1.25e9);
        let limit = ((2.0 * rate * delay.as_secs_f64()) as usize).clamp(1 << 20, 64 << 20);
        let can_read = !reader.ended && queued < limit && !delay.is_zero();
        let head = queue.front().map(|(t, _)| *t);
        let event = tokio::select! {
            biased;
            _ = sleep_until_opt(head), if head.is_some() => Event::Due,
            r = read_chunk(reader, port, opts.chunk), if can_read => Event::Read(r),
        };
        match event {
            Event::Due => {
                if let Some((_, data)) = queue.pop_front() {
                    queued -= data.len();
                    writer.chunk(&data).await?;
                    total += data.len() as u64;
                }
            }
            Event::Read(r) => {
                let data = r?;
                if !data.is_empty() {
                    queued += data.len();
                    queue.push_back((Instant::now() + delay, data));
                }
            }
        }
    }
}

async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Read one chunk into memory, charged to the port. Empty at the end of input.
/// Cancel-safe: bytes read wait in the lookahead; tokens are taken only right before the
/// (synchronous) take.
async fn read_chunk<A: Socket>(
    reader: &mut Reader<'_, A>,
    port: Option<&Port>,
    chunk: usize,
) -> io::Result<Vec<u8>> {
    loop {
        let budget = reader.budget().await?;
        if budget == 0 {
            return Ok(Vec::new());
        }
        if reader.buffered() == 0 {
            reader.fill_or_end().await?;
            continue;
        }
        let want = budget.min(reader.buffered()).min(chunk);
        let grant = match port {
            Some(port) => port.grant(want).await,
            None => want,
        };
        let data = reader.take(grant).to_vec();
        record(port, data.len());
        return Ok(data);
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
    while Instant::now() < end {
        let n = port.grant(zeros.len()).await;
        record(Some(port), n);
        writer.chunk(&zeros[..n]).await?;
        total += n as u64;
    }
    writer.finish().await?;
    Ok(total)
}

/// Calibration sink: read framed chunks through `port` and discard them.
/// Returns (bytes, seconds from first to last byte).
pub async fn discard<S: Socket>(src: &S, port: &Port) -> io::Result<(u64, f64)> {
    let mut reader = Reader::new(src, Framing::Framed);
    let mut total = 0u64;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    loop {
        let chunk = read_chunk(&mut reader, Some(port), 256 * 1024).await?;
        if chunk.is_empty() {
            break;
        }
        first.get_or_insert_with(Instant::now);
        last = Instant::now();
        total += chunk.len() as u64;
    }
    let secs = first.map(|f| (last - f).as_secs_f64()).unwrap_or(0.0);
    Ok((total, secs))
}
