//! Collective operations over a [`Group`] of ranks (the world, a process row or column).
//!
//! Every rank of a group calls the same collectives in the same order (SPMD), and messages
//! between two ranks arrive in order, so each collective simply consumes the messages it
//! expects; tags only catch ranks that got out of step.

use super::{Comm, CommError};

const TAG_BCAST: u32 = 1;
const TAG_ALLGATHER: u32 = 2;
const TAG_ALLTOALL: u32 = 3;
const TAG_GATHER: u32 = 4;

/// Segment size of the pipelined broadcast.
pub const PIPELINE_SEGMENT: usize = 256 * 1024;

/// A set of ranks (global rank numbers) and this rank's index among them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    members: Vec<usize>,
    me: usize,
}

impl Group {
    /// `members` in group order; `me_global` must be one of them.
    pub fn new(members: Vec<usize>, me_global: usize) -> Group {
        let me = members
            .iter()
            .position(|&m| m == me_global)
            .unwrap_or(usize::MAX);
        Group { members, me }
    }

    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// This rank's index in the group.
    pub fn index(&self) -> usize {
        self.me
    }

    /// Global rank of group member `i`.
    pub fn global(&self, i: usize) -> usize {
        self.members[i]
    }
}

pub use throttle_proto::workload::Bcast;

/// Broadcast `data` (meaningful at `root`, a group index) to every member; returns it.
pub fn bcast(
    comm: &Comm,
    g: &Group,
    root: usize,
    data: Vec<u8>,
    algo: Bcast,
) -> Result<Vec<u8>, CommError> {
    let n = g.size();
    if n == 1 {
        return Ok(data);
    }
    let me = g.index();
    let rel = (me + n - root) % n;
    let abs = |r: usize| g.global((r + root) % n);
    match algo {
        Bcast::Flat => {
            if rel == 0 {
                for r in 1..n {
                    comm.send(abs(r), TAG_BCAST, &data)?;
                }
                Ok(data)
            } else {
                comm.recv(abs(0), TAG_BCAST)
            }
        }
        Bcast::Binomial => {
            let mut data = data;
            let mut mask = 1;
            while mask < n {
                if rel & mask != 0 {
                    data = comm.recv(abs(rel - mask), TAG_BCAST)?;
                    break;
                }
                mask <<= 1;
            }
            mask >>= 1;
            while mask > 0 {
                if rel + mask < n {
                    comm.send(abs(rel + mask), TAG_BCAST, &data)?;
                }
                mask >>= 1;
            }
            Ok(data)
        }
        Bcast::Pipelined => {
            // Length first, then segments down the chain rel 0 -> 1 -> ... -> n-1.
            let next = (rel + 1 < n).then(|| abs(rel + 1));
            if rel == 0 {
                let len = (data.len() as u64).to_le_bytes();
                if let Some(nx) = next {
                    comm.send(nx, TAG_BCAST, &len)?;
                    for seg in data.chunks(PIPELINE_SEGMENT) {
                        comm.send(nx, TAG_BCAST, seg)?;
                    }
                }
                return Ok(data);
            }
            let prev = abs(rel - 1);
            let len_bytes = comm.recv(prev, TAG_BCAST)?;
            let len = u64::from_le_bytes(
                len_bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| CommError::Protocol("bad pipelined broadcast header".into()))?,
            ) as usize;
            if let Some(nx) = next {
                comm.send(nx, TAG_BCAST, &len_bytes)?;
            }
            let mut out = Vec::with_capacity(len);
            while out.len() < len {
                let seg = comm.recv(prev, TAG_BCAST)?;
                if let Some(nx) = next {
                    comm.send(nx, TAG_BCAST, &seg)?;
                }
                out.extend_from_slice(&seg);
            }
            Ok(out)
        }
    }
}

/// Every member's `mine`, indexed by group index.
pub fn allgatherv(comm: &Comm, g: &Group, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
    let n = g.size();
    let me = g.index();
    for k in 1..n {
        comm.send(g.global((me + k) % n), TAG_ALLGATHER, mine)?;
    }
    let mut out = vec![Vec::new(); n];
    out[me] = mine.to_vec();
    for k in 1..n {
        let src = (me + n - k) % n;
        out[src] = comm.recv(g.global(src), TAG_ALLGATHER)?;
    }
    Ok(out)
}

/// Send `parts[i]` to member i; returns what each member sent to us.
pub fn alltoallv(
    comm: &Comm,
    g: &Group,
    mut parts: Vec<Vec<u8>>,
) -> Result<Vec<Vec<u8>>, CommError> {
    let n = g.size();
    if parts.len() != n {
        return Err(CommError::Protocol(format!(
            "alltoallv needs {n} parts, got {}",
            parts.len()
        )));
    }
    let me = g.index();
    for k in 1..n {
        let dst = (me + k) % n;
        comm.send(g.global(dst), TAG_ALLTOALL, &parts[dst])?;
    }
    let mut out = vec![Vec::new(); n];
    out[me] = std::mem::take(&mut parts[me]);
    for k in 1..n {
        let src = (me + n - k) % n;
        out[src] = comm.recv(g.global(src), TAG_ALLTOALL)?;
    }
    Ok(out)
}

/// Gather every member's `mine` at `root` (group index); others get an empty vector.
pub fn gatherv(
    comm: &Comm,
    g: &Group,
    root: usize,
    mine: &[u8],
) -> Result<Vec<Vec<u8>>, CommError> {
    let n = g.size();
    if g.index() != root {
        comm.send(g.global(root), TAG_GATHER, mine)?;
        return Ok(Vec::new());
    }
    let mut out = vec![Vec::new(); n];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = if i == root {
            mine.to_vec()
        } else {
            comm.recv(g.global(i), TAG_GATHER)?
        };
    }
    Ok(out)
}

/// Wait until every member arrived.
pub fn barrier(comm: &Comm, g: &Group) -> Result<(), CommError> {
    allgatherv(comm, g, &[]).map(|_| ())
}

fn reduce_u64(
    comm: &Comm,
    g: &Group,
    v: u64,
    f: impl Fn(u64, u64) -> u64,
) -> Result<u64, CommError> {
    let all = allgatherv(comm, g, &v.to_le_bytes())?;
    let mut acc: Option<u64> = None;
    for b in all {
        let x = u64::from_le_bytes(
            b.as_slice()
                .try_into()
                .map_err(|_| CommError::Protocol("bad allreduce payload".into()))?,
        );
        acc = Some(match acc {
            Some(a) => f(a, x),
            None => x,
        });
    }
    Ok(acc.unwrap_or(0))
}

pub fn allreduce_sum_u64(comm: &Comm, g: &Group, v: u64) -> Result<u64, CommError> {
    reduce_u64(comm, g, v, |a, b| a.wrapping_add(b))
}

/// Fold every member's f64 in group order (so every member gets the same bits).
fn reduce_f64(
    comm: &Comm,
    g: &Group,
    v: f64,
    init: f64,
    f: impl Fn(f64, f64) -> f64,
) -> Result<f64, CommError> {
    let all = allgatherv(comm, g, &v.to_le_bytes())?;
    let mut acc = init;
    for b in all {
        let x = f64::from_le_bytes(
            b.as_slice()
                .try_into()
                .map_err(|_| CommError::Protocol("bad allreduce payload".into()))?,
        );
        acc = f(acc, x);
    }
    Ok(acc)
}

/// Sum of f64 values, added in group order (the same result on every member).
pub fn allreduce_sum_f64(comm: &Comm, g: &Group, v: f64) -> Result<f64, CommError> {
    reduce_f64(comm, g, v, 0.0, |a, b| a + b)
}

pub fn allreduce_max_f64(comm: &Comm, g: &Group, v: f64) -> Result<f64, CommError> {
    reduce_f64(comm, g, v, f64::NEG_INFINITY, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::run_local;

    #[test]
    fn every_broadcast_delivers_the_same_bytes() {
        for algo in [Bcast::Flat, Bcast::Binomial, Bcast::Pipelined] {
            for n in [1, 2, 3, 5, 8] {
                for root in [0, n - 1] {
                    let got = run_local(n, move |c| {
                        let g = c.world();
                        let data: Vec<u8> = if g.index() == root {
                            (0..600_000u32).map(|i| (i % 251) as u8).collect()
                        } else {
                            Vec::new()
                        };
                        bcast(&c, &g, root, data, algo).unwrap()
                    });
                    let want: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
                    for (r, v) in got.iter().enumerate() {
                        assert!(v == &want, "{algo} n={n} root={root} rank {r}");
                    }
                }
            }
        }
    }

    #[test]
    fn allgather_alltoall_and_reductions() {
        let got = run_local(4, |c| {
            let g = c.world();
            let me = g.index();
            let all = allgatherv(&c, &g, &[me as u8; 3]).unwrap();
            let parts = (0..4).map(|d| vec![(me * 10 + d) as u8]).collect();
            let recv = alltoallv(&c, &g, parts).unwrap();
            let s = allreduce_sum_u64(&c, &g, me as u64 + 1).unwrap();
            let m = allreduce_max_f64(&c, &g, me as f64).unwrap();
            let gathered = gatherv(&c, &g, 2, &[me as u8]).unwrap();
            barrier(&c, &g).unwrap();
            (all, recv, s, m, gathered)
        });
        for (me, (all, recv, s, m, gathered)) in got.into_iter().enumerate() {
            assert_eq!(all, (0..4).map(|r| vec![r as u8; 3]).collect::<Vec<_>>());
            assert_eq!(
                recv,
                (0..4)
                    .map(|src| vec![(src * 10 + me) as u8])
                    .collect::<Vec<_>>()
            );
            assert_eq!(s, 10);
            assert_eq!(m, 3.0);
            if me == 2 {
                assert_eq!(gathered, vec![vec![0], vec![1], vec![2], vec![3]]);
            } else {
                assert!(gathered.is_empty());
            }
        }
    }

    #[test]
    fn sub_groups_work_independently() {
        // 2 x 2 grid: rows {0,1} {2,3}, columns {0,2} {1,3}.
        let got = run_local(4, |c| {
            let me = c.rank();
            let row = Group::new(vec![me / 2 * 2, me / 2 * 2 + 1], me);
            let col = Group::new(vec![me % 2, me % 2 + 2], me);
            let r = allgatherv(&c, &row, &[me as u8]).unwrap();
            let k = allgatherv(&c, &col, &[me as u8]).unwrap();
            (r, k)
        });
        assert_eq!(got[3].0, vec![vec![2], vec![3]]);
        assert_eq!(got[3].1, vec![vec![1], vec![3]]);
    }

    #[test]
    fn a_dead_peer_is_an_error_not_a_hang() {
        let got = run_local(2, |c| {
            if c.rank() == 1 {
                // Rank 1 "dies": its stream to rank 0 breaks.
                if let crate::comm::Transport::Local { peers } = &c.transport {
                    peers[0].fail(1, "connection reset".into());
                }
                return None;
            }
            Some(c.recv(1, 5).unwrap_err().to_string())
        });
        let msg = got[0].clone().unwrap();
        assert!(msg.contains("rank 1") && msg.contains("reset"), "{msg}");
    }
}
