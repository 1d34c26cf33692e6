//! One breadth-first search on the distributed graph (top-down, level-synchronous).
//!
//! Per level: *expand* the frontier within the process column (a list of vertices, or a
//! bitmap when the frontier is large), scan the local block for unseen destinations,
//! *fold* (destination, parent) pairs to their owners within the process row, and let the
//! owners keep the first parent offered. A per-search bitmap of destinations already sent
//! keeps each rank from offering the same vertex twice.
//!
//! With an emulated scan rate, each level's local step lasts at least the time a node
//! scanning that many edges per second would take (the rest is slept): the search and
//! its messages stay real, the compute time becomes that of a node with its own CPU.

use std::time::{Duration, Instant};

use crate::comm::collectives;
use crate::comm::{Comm, CommError};

use super::graph::{bytes_to_u32s, u32s_to_bytes, DistGraph};

/// Parent and level of every owned vertex (`-1`: not reached).
pub struct SearchResult {
    pub parent: Vec<i64>,
    pub level: Vec<i64>,
    /// With an emulated scan rate: the local steps' emulated time, this rank (s).
    pub emulated_seconds: f64,
}

/// Run a BFS from `root`: collective over all ranks. `scan_rate`: emulate the local steps
/// at this many edges scanned per second (see the module doc).
pub fn bfs(
    comm: &Comm,
    g: &DistGraph,
    root: u32,
    scan_rate: Option<f64>,
) -> Result<SearchResult, CommError> {
    let me = comm.rank();
    let world = comm.world();
    let row = g.grid.row(me);
    let col = g.grid.col(me);
    let (own_start, own_end) = g.own_range();
    let own_len = (own_end - own_start) as usize;
    let mut tree = Tree {
        own_start,
        parent: vec![-1i64; own_len],
        level: vec![-1i64; own_len],
    };
    let mut sent = vec![0u64; g.dest_len().div_ceil(64)];
    let mut frontier: Vec<u32> = Vec::new();
    if (own_start..own_end).contains(&(root as u64)) {
        let l = (root as u64 - own_start) as usize;
        tree.parent[l] = root as i64;
        tree.level[l] = 0;
        frontier.push(root);
    }
    let mut global = 1u64;
    let mut depth = 0i64;
    let mut emulated_seconds = 0.0;
    loop {
        // Expand within the process column.
        let use_bitmap = global > g.n / 32;
        let mine = if use_bitmap {
            frontier_bitmap(&frontier, own_start, g.chunk as usize)
        } else {
            u32s_to_bytes(&frontier)
        };
        let gathered = collectives::allgatherv(comm, &col, &mine)?;
        // Local step.
        let local_start = Instant::now();
        let (out, scanned) = scan_frontiers(g, &gathered, use_bitmap, &mut sent);
        if let Some(rate) = scan_rate {
            emulated_seconds += sleep_to_scan_time(scanned, rate, local_start);
        }
        // Fold within the process row.
        let parts = out.iter().map(|v| u32s_to_bytes(v)).collect();
        let offers = collectives::alltoallv(comm, &row, parts)?;
        tree.adopt(offers, depth + 1, &mut frontier);
        global = collectives::allreduce_sum_u64(comm, &world, frontier.len() as u64)?;
        if global == 0 {
            break;
        }
        depth += 1;
    }
    Ok(SearchResult {
        parent: tree.parent,
        level: tree.level,
        emulated_seconds,
    })
}

/// Parent and level of the vertices this rank owns, from `own_start` on.
struct Tree {
    own_start: u64,
    parent: Vec<i64>,
    level: Vec<i64>,
}

impl Tree {
    /// Keep the first parent offered for each unseen owned vertex (offers are
    /// (destination, parent) pairs), at `level`; `frontier` becomes the vertices taken.
    fn adopt(&mut self, offers: Vec<Vec<u8>>, level: i64, frontier: &mut Vec<u32>) {
        frontier.clear();
        for bytes in offers {
            let pairs = bytes_to_u32s(&bytes);
            for pair in pairs.chunks_exact(2) {
                let l = (pair[0] as u64 - self.own_start) as usize;
                if self.parent[l] < 0 {
                    self.parent[l] = pair[1] as i64;
                    self.level[l] = level;
                    frontier.push(pair[0]);
                }
            }
        }
    }
}

/// The frontier as a bitmap over this rank's `chunk` vertices (little-endian words).
fn frontier_bitmap(frontier: &[u32], own_start: u64, chunk: usize) -> Vec<u8> {
    let mut bits = vec![0u64; chunk.div_ceil(64)];
    for &v in frontier {
        let l = (v as u64 - own_start) as usize;
        bits[l / 64] |= 1 << (l % 64);
    }
    let mut b = Vec::with_capacity(bits.len() * 8);
    for w in bits {
        b.extend_from_slice(&w.to_le_bytes());
    }
    b
}

/// The local step: scan the edges of every frontier vertex the column gathered (lists,
/// or bitmaps when `use_bitmap`) for destinations not yet in `sent`. Returns the
/// (destination, parent) pairs for each column of the process row, and the edges scanned.
fn scan_frontiers(
    g: &DistGraph,
    gathered: &[Vec<u8>],
    use_bitmap: bool,
    sent: &mut [u64],
) -> (Vec<Vec<u32>>, u64) {
    let dest_base = g.dest_base();
    let mut scanned = 0u64;
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); g.grid.cols];
    let mut scan = |s: u32, out: &mut Vec<Vec<u32>>| {
        let li = g.source_index(s);
        let targets = &g.targets[g.offsets[li]..g.offsets[li + 1]];
        scanned += targets.len() as u64;
        for &d in targets {
            let dl = (d as u64 - dest_base) as usize;
            let (w, b) = (dl / 64, 1u64 << (dl % 64));
            if sent[w] & b == 0 {
                sent[w] |= b;
                let to = (d as u64 / g.chunk) as usize % g.grid.cols;
                out[to].push(d);
                out[to].push(s);
            }
        }
    };
    for (r, bytes) in gathered.iter().enumerate() {
        if use_bitmap {
            let owner = r * g.grid.cols + g.grid.j;
            let base = owner as u64 * g.chunk;
            for (wi, w) in bytes.chunks_exact(8).enumerate() {
                let mut word = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
                while word != 0 {
                    let bit = word.trailing_zeros() as u64;
                    word &= word - 1;
                    scan((base + wi as u64 * 64 + bit) as u32, &mut out);
                }
            }
        } else {
            for s in bytes_to_u32s(bytes) {
                scan(s, &mut out);
            }
        }
    }
    (out, scanned)
}

/// Emulated scan rate: sleep until the local step begun at `local_start` has lasted as
/// long as scanning `scanned` edges at `rate` per second would; returns that time (s).
fn sleep_to_scan_time(scanned: u64, rate: f64, local_start: Instant) -> f64 {
    let want = scanned as f64 / rate;
    let left = want - local_start.elapsed().as_secs_f64();
    if left > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(left));
    }
    want
}
