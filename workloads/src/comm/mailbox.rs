//! Where received messages wait until a rank asks for them.
//!
//! One FIFO per source rank. Reader threads (or, in-process, the sender itself) push
//! messages in; `recv` pops them in order. A source whose stream broke is marked failed,
//! and a `recv` from it then returns that error instead of waiting forever.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::CommError;

/// A received message.
#[derive(Debug)]
pub struct Message {
    pub tag: u32,
    pub data: Vec<u8>,
}

#[derive(Default)]
struct Slot {
    queue: VecDeque<Message>,
    failed: Option<String>,
}

pub struct Mailbox {
    slots: Mutex<Vec<Slot>>,
    ready: Condvar,
    /// Where `pop_any` starts looking, so no source is always served first.
    next_any: std::sync::atomic::AtomicUsize,
}

impl Mailbox {
    pub fn new(size: usize) -> Mailbox {
        Mailbox {
            slots: Mutex::new((0..size).map(|_| Slot::default()).collect()),
            ready: Condvar::new(),
            next_any: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    pub fn push(&self, src: usize, msg: Message) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots[src].queue.push_back(msg);
        self.ready.notify_all();
    }

    /// Mark `src` as broken; pending messages stay readable.
    pub fn fail(&self, src: usize, why: String) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if slots[src].failed.is_none() {
            slots[src].failed = Some(why);
        }
        self.ready.notify_all();
    }

    /// Whether a message from `src` is waiting (MPI_Iprobe).
    pub fn waiting(&self, src: usize) -> bool {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.get(src).is_some_and(|s| !s.queue.is_empty())
    }

    /// Wait until `check` decides (Some: a message or an error), or `timeout` passes
    /// (then `timed_out`). `check` sees every source's slot, under the lock, each time
    /// a message arrives or a source fails.
    fn wait_for<T>(
        &self,
        timeout: Duration,
        timed_out: CommError,
        mut check: impl FnMut(&mut [Slot]) -> Option<Result<T, CommError>>,
    ) -> Result<T, CommError> {
        let deadline = Instant::now() + timeout;
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(decided) = check(&mut slots) {
                return decided;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(timed_out);
            }
            slots = self
                .ready
                .wait_timeout(slots, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Next message from `src`, which must carry `tag`.
    pub fn pop(&self, src: usize, tag: u32, timeout: Duration) -> Result<Vec<u8>, CommError> {
        let timed_out = CommError::Timeout {
            rank: src,
            seconds: timeout.as_secs_f64(),
        };
        self.wait_for(timeout, timed_out, |slots| {
            if let Some(m) = slots[src].queue.pop_front() {
                if m.tag != tag {
                    return Some(Err(CommError::Protocol(format!(
                        "expected a message with tag {tag} from rank {src}, got tag {} (ranks are out of step)",
                        m.tag
                    ))));
                }
                return Some(Ok(m.data));
            }
            slots[src].failed.as_ref().map(|why| {
                Err(CommError::PeerFailed {
                    rank: src,
                    why: why.clone(),
                })
            })
        })
    }

    /// The next message with `tag` from any source (MPI_ANY_SOURCE), with its source.
    /// Only the head of each source's queue is looked at, so messages from one source
    /// stay in order; a head with another tag waits for a `pop` of its own (as MPI
    /// matches by tag). Sources are tried in turn, starting after the last one served. A
    /// source whose stream ended (failed, or closed: the rank finished) and that holds
    /// no message with `tag` at its head is an error, even if the caller expected nothing
    /// more from it: use it while every possible sender is still running.
    pub fn pop_any(&self, tag: u32, timeout: Duration) -> Result<(usize, Vec<u8>), CommError> {
        use std::sync::atomic::Ordering;
        let timed_out = CommError::TimeoutAny {
            seconds: timeout.as_secs_f64(),
        };
        self.wait_for(timeout, timed_out, |slots| {
            let n = slots.len();
            let start = self.next_any.load(Ordering::Relaxed);
            for src in (0..n).map(|i| (start + i) % n) {
                if slots[src].queue.front().is_some_and(|m| m.tag == tag) {
                    let m = slots[src].queue.pop_front().map(|m| m.data);
                    self.next_any.store(src + 1, Ordering::Relaxed);
                    return Some(Ok((src, m.unwrap_or_default())));
                }
            }
            slots.iter().enumerate().find_map(|(i, s)| {
                let stuck = s.queue.front().is_none_or(|m| m.tag != tag);
                stuck.then_some(s.failed.as_ref()).flatten().map(|why| {
                    Err(CommError::PeerFailed {
                        rank: i,
                        why: why.clone(),
                    })
                })
            })
        })
    }
}
