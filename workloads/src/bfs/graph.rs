//! The graph distributed on an r x c process grid (Buluc & Madduri, SC'11).
//!
//! Vertices are cut into p chunks; rank k = (i, j) (i = k / c, j = k % c) owns chunk k.
//! The *source block* j is the union of the chunks owned by process column j; the *dest
//! block* i is the union of the chunks of process row i (contiguous). Rank (i, j) stores
//! the adjacency from sources in block j to destinations in block i, as CSR. A BFS level
//! therefore gathers the frontier within the process column (expand), scans the local
//! block, and sends discoveries to their owners within the process row (fold).

use crate::comm::collectives::{self, Group};
use crate::comm::{Comm, CommError};

use super::generator::Kronecker;

/// The process grid and this rank's place in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grid {
    pub rows: usize,
    pub cols: usize,
    pub i: usize,
    pub j: usize,
}

impl Grid {
    /// The most square r x c grid with r <= c.
    pub fn new(p: usize, rank: usize) -> Grid {
        let mut rows = (p as f64).sqrt() as usize;
        while rows > 1 && !p.is_multiple_of(rows) {
            rows -= 1;
        }
        let rows = rows.max(1);
        let cols = p / rows;
        Grid {
            rows,
            cols,
            i: rank / cols,
            j: rank % cols,
        }
    }

    /// This rank's process row (members ordered by column).
    pub fn row(&self, rank: usize) -> Group {
        Group::new(
            (0..self.cols).map(|c| self.i * self.cols + c).collect(),
            rank,
        )
    }

    /// This rank's process column (members ordered by row).
    pub fn col(&self, rank: usize) -> Group {
        Group::new(
            (0..self.rows).map(|r| r * self.cols + self.j).collect(),
            rank,
        )
    }
}

pub fn u32s_to_bytes(v: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 4);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

pub fn bytes_to_u32s(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// This rank's part of the graph.
pub struct DistGraph {
    pub n: u64,
    pub chunk: u64,
    pub grid: Grid,
    pub rank: usize,
    /// CSR over source-block local indices.
    pub offsets: Vec<usize>,
    pub targets: Vec<u32>,
    /// Degree of each owned vertex (self-loops excluded).
    pub degree: Vec<u32>,
}

impl DistGraph {
    pub fn owner(&self, v: u32) -> usize {
        (v as u64 / self.chunk) as usize
    }

    /// The owned vertex range.
    pub fn own_range(&self) -> (u64, u64) {
        let s = (self.rank as u64 * self.chunk).min(self.n);
        (s, ((self.rank as u64 + 1) * self.chunk).min(self.n))
    }

    /// First vertex of the dest block.
    pub fn dest_base(&self) -> u64 {
        (self.grid.i * self.grid.cols) as u64 * self.chunk
    }

    /// Number of vertices in the dest block.
    pub fn dest_len(&self) -> usize {
        let base = self.dest_base();
        let end = (base + self.grid.cols as u64 * self.chunk).min(self.n);
        end.saturating_sub(base) as usize
    }

    /// Local index of `v` (which must be in source block j).
    #[inline]
    pub fn source_index(&self, v: u32) -> usize {
        let k = v as u64 / self.chunk;
        let row = k as usize / self.grid.cols;
        row * self.chunk as usize + (v as u64 - k * self.chunk) as usize
    }

    /// Generate this rank's share of edges and distribute them: collective.
    pub fn build(comm: &Comm, gen: &Kronecker) -> Result<DistGraph, CommError> {
        let p = comm.size();
        let rank = comm.rank();
        let grid = Grid::new(p, rank);
        let n = gen.vertices();
        let chunk = n.div_ceil(p as u64).max(1);
        let (from, to) = gen.share(rank, p);
        let mut parts: Vec<Vec<u32>> = vec![Vec::new(); p];
        let owner = |v: u32| (v as u64 / chunk) as usize;
        for e in from..to {
            let (u, v) = gen.edge(e);
            if u == v {
                continue;
            }
            for (s, d) in [(u, v), (v, u)] {
                let dest = (owner(d) / grid.cols) * grid.cols + owner(s) % grid.cols;
                parts[dest].push(s);
                parts[dest].push(d);
            }
        }
        let bytes = parts.iter().map(|v| u32s_to_bytes(v)).collect();
        drop(parts);
        let received = collectives::alltoallv(comm, &comm.world(), bytes)?;
        let mut g = DistGraph {
            n,
            chunk,
            grid: grid.clone(),
            rank,
            offsets: Vec::new(),
            targets: Vec::new(),
            degree: Vec::new(),
        };
        let sources = grid.rows * chunk as usize;
        let mut counts = vec![0usize; sources + 1];
        for b in &received {
            for pair in b.chunks_exact(8) {
                let s = u32::from_le_bytes([pair[0], pair[1], pair[2], pair[3]]);
                counts[g.source_index(s) + 1] += 1;
            }
        }
        for k in 0..sources {
            counts[k + 1] += counts[k];
        }
        let mut fill = counts.clone();
        let mut targets = vec![0u32; counts[sources]];
        for b in &received {
            for pair in b.chunks_exact(8) {
                let s = u32::from_le_bytes([pair[0], pair[1], pair[2], pair[3]]);
                let d = u32::from_le_bytes([pair[4], pair[5], pair[6], pair[7]]);
                let li = g.source_index(s);
                targets[fill[li]] = d;
                fill[li] += 1;
            }
        }
        drop(received);
        g.offsets = counts;
        g.targets = targets;
        // Degrees: each column member holds part of every source's adjacency.
        let col = grid.col(rank);
        let mut slices = Vec::with_capacity(grid.rows);
        for r in 0..grid.rows {
            let lo = r * chunk as usize;
            let degs: Vec<u32> = (lo..lo + chunk as usize)
                .map(|li| (g.offsets[li + 1] - g.offsets[li]) as u32)
                .collect();
            slices.push(u32s_to_bytes(&degs));
        }
        let got = collectives::alltoallv(comm, &col, slices)?;
        let (s, e) = g.own_range();
        let mut degree = vec![0u32; (e - s) as usize];
        for b in got {
            for (k, d) in bytes_to_u32s(&b).into_iter().enumerate().take(degree.len()) {
                degree[k] += d;
            }
        }
        g.degree = degree;
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_are_as_square_as_possible() {
        let dims = |p| {
            let g = Grid::new(p, 0);
            (g.rows, g.cols)
        };
        assert_eq!(dims(1), (1, 1));
        assert_eq!(dims(2), (1, 2));
        assert_eq!(dims(4), (2, 2));
        assert_eq!(dims(6), (2, 3));
        assert_eq!(dims(9), (3, 3));
        assert_eq!(dims(7), (1, 7));
        let g = Grid::new(6, 4);
        assert_eq!((g.i, g.j), (1, 1));
    }
}
