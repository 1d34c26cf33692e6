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
}

impl Mailbox {
    pub fn new(size: usize) -> Mailbox {
        Mailbox {
            slots: Mutex::new((0..size).map(|_| Slot::default()).collect()),
            ready: Condvar::new(),
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

    /// Next message from `src`, which must carry `tag`.
    pub fn pop(&self, src: usize, tag: u32, timeout: Duration) -> Result<Vec<u8>, CommError> {
        let deadline = Instant::now() + timeout;
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(m) = slots[src].queue.pop_front() {
                if m.tag != tag {
                    return Err(CommError::Protocol(format!(
                        "expected a message with tag {tag} from rank {src}, got tag {} (ranks are out of step)",
                        m.tag
                    )));
                }
                return Ok(m.data);
            }
            if let Some(why) = &slots[src].failed {
                return Err(CommError::PeerFailed {
                    rank: src,
                    why: why.clone(),
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(CommError::Timeout {
                    rank: src,
                    seconds: timeout.as_secs_f64(),
                });
            }
            slots = self
                .ready
                .wait_timeout(slots, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
