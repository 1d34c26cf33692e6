//! What this library did to each socket, keyed by the socket's inode (so `dup`ed
//! descriptors and forked children find the same record, and a descriptor number reused
//! for another socket does not).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use libc::c_int;

/// One socket's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// Connected through the agent: its peer is `peer` (the real one is the agent).
    Connected { peer: SocketAddr },
    /// A non-blocking connect through the agent failed: `SO_ERROR` (or the next
    /// `connect`) reports `errno`, once.
    Failed { errno: i32 },
    /// Accepted from the agent's delivery of a connection from `peer`.
    Accepted { peer: SocketAddr },
}

static TABLE: Mutex<Option<HashMap<u64, Record>>> = Mutex::new(None);
/// Records held: zero lets `close` and `getpeername` skip the lookup.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// The socket's inode, or `None` for a descriptor that is not a socket.
pub fn inode(fd: c_int) -> Option<u64> {
    // SAFETY: all-zero is a valid stat, and fstat writes one.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return None;
    }
    Some(st.st_ino)
}

fn with<R>(f: impl FnOnce(&mut HashMap<u64, Record>) -> R) -> R {
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let r = f(t.get_or_insert_with(HashMap::new));
    COUNT.store(t.as_ref().map_or(0, HashMap::len), Ordering::Relaxed);
    r
}

/// Whether any socket has a record.
pub fn any() -> bool {
    COUNT.load(Ordering::Relaxed) > 0
}

pub fn put(fd: c_int, record: Record) {
    if let Some(ino) = inode(fd) {
        with(|t| t.insert(ino, record));
    }
}

pub fn get(fd: c_int) -> Option<Record> {
    if !any() {
        return None;
    }
    let ino = inode(fd)?;
    with(|t| t.get(&ino).copied())
}

/// Take a failed connect's errno (the record is gone afterwards).
pub fn take_error(fd: c_int) -> Option<i32> {
    if !any() {
        return None;
    }
    let ino = inode(fd)?;
    with(|t| match t.get(&ino) {
        Some(Record::Failed { errno }) => {
            let e = *errno;
            t.remove(&ino);
            Some(e)
        }
        _ => None,
    })
}

/// Forget a socket that is being closed. A `dup` of it keeps the socket open, and its
/// record would be lost: acceptable (its `getpeername` then reports the agent).
pub fn forget(fd: c_int) {
    if !any() {
        return;
    }
    if let Some(ino) = inode(fd) {
        with(|t| t.remove(&ino));
    }
}
