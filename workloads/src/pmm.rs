//! Parallel matrix multiplication, Fox's broadcast-multiply-roll (Li, Qiu, Fox; docs/method.md).
//!
//! C = A x B for M x M doubles on a q x q process grid (p = q^2), blocks of m = M/q. In
//! each of the q steps, the A block of column (i + k) mod q is broadcast along process row
//! i (flat, binomial or pipelined), multiplied into C with the local kernel, and B is
//! rolled one step up the process column. Compute, broadcast and roll are timed apart so
//! the analytic model of Li, Qiu and Fox (Tflops per flop, Tcomm per element) can be fitted.
//!
//! With `emulate_gflops` set, the kernel is replaced by a sleep of the time a node at that
//! rate would take (2 m^3 flops per step): every rank stands for a node with its own CPU,
//! so a 2-core host can run 16 ranks whose communication is real and whose computation
//! does not compete for the host's cores. There is then no product to check; instead
//! every block a rank receives is checked against the block Fox's algorithm must deliver.

use std::time::{Duration, Instant};

use serde::Serialize;
use throttle_proto::emulation;
use throttle_proto::workload::pmm::grid_side as pmm_grid_side;
use throttle_proto::workload::PmmOptions;

use crate::comm::collectives::{self, Bcast, Group};
use crate::comm::{Comm, CommError};

const TAG_ROLL: u32 = 20;

pub use throttle_proto::workload::pmm::SERIAL_CHECK_MAX;

/// Longest sleep one emulated step may ask for (a day): beyond it the settings are a typo.
const EMULATED_STEP_MAX_S: f64 = 86_400.0;

#[derive(Clone, Debug, Serialize)]
pub struct PmmResult {
    pub workload: &'static str,
    pub size: usize,
    pub procs: usize,
    pub grid: usize,
    pub block: usize,
    pub bcast: String,
    /// The local kernel (`matrixmultiply` or `openblas`), or `emulated` (sleep).
    pub kernel: &'static str,
    /// The emulated node rate, when the kernel was a sleep.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulate_gflops: Option<f64>,
    /// Wall time of the multiplication (all ranks, barrier to barrier).
    pub seconds: f64,
    /// This rank's time in the local kernel, broadcasts and rolls.
    pub compute_seconds: f64,
    pub bcast_seconds: f64,
    pub roll_seconds: f64,
    /// Largest of each over all ranks.
    pub max_compute_seconds: f64,
    pub max_comm_seconds: f64,
    pub gflops: f64,
    /// Seconds per floating-point operation in the kernel (Tflops of the PMM model).
    pub tflops: f64,
    /// Seconds per matrix element communicated (Tcomm of the PMM model), 0 on one rank.
    pub tcomm: f64,
    pub verification: String,
    pub verified: bool,
}

impl PmmResult {
    /// What rank 0 reports: the multiplication's time, the verification, GFLOP/s and the
    /// model parameters (Tflops, Tcomm); the whole result as detail.
    pub fn report(&self) -> throttle_proto::result::WorkloadResult {
        use throttle_proto::result::{Check, WorkloadResult};
        WorkloadResult {
            workload: "pmm".into(),
            seconds: Some(self.seconds),
            check: if self.verified {
                Check::Passed
            } else {
                Check::Failed(self.verification.clone())
            },
            metrics: [
                ("gflops", self.gflops),
                ("tflops", self.tflops),
                ("tcomm", self.tcomm),
                ("compute_seconds", self.compute_seconds),
                ("bcast_seconds", self.bcast_seconds),
                ("roll_seconds", self.roll_seconds),
                ("max_compute_seconds", self.max_compute_seconds),
                ("max_comm_seconds", self.max_comm_seconds),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            detail: serde_json::to_value(self).unwrap_or_default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PmmError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Comm(#[from] CommError),
}

/// Entry (r, c) of A.
pub fn a_entry(r: usize, c: usize) -> f64 {
    ((r * 31 + c * 17) % 97) as f64 / 97.0 - 0.5
}

/// Entry (r, c) of B.
pub fn b_entry(r: usize, c: usize) -> f64 {
    ((r * 13 + c * 29 + 5) % 89) as f64 / 89.0 - 0.5
}

fn block(m: usize, bi: usize, bj: usize, f: fn(usize, usize) -> f64) -> Vec<f64> {
    let mut v = Vec::with_capacity(m * m);
    for r in 0..m {
        for c in 0..m {
            v.push(f(bi * m + r, bj * m + c));
        }
    }
    v
}

/// Name of the local kernel in use.
pub const KERNEL: &str = if cfg!(feature = "openblas") {
    "openblas"
} else {
    "matrixmultiply"
};

/// C += A x B for row-major n x n blocks, on one core.
#[cfg(not(feature = "openblas"))]
pub fn gemm_acc(n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    assert!(a.len() >= n * n && b.len() >= n * n && c.len() >= n * n);
    // SAFETY: the slices hold n*n elements each (checked above), row-major with row
    // stride n and column stride 1.
    unsafe {
        matrixmultiply::dgemm(
            n,
            n,
            n,
            1.0,
            a.as_ptr(),
            n as isize,
            1,
            b.as_ptr(),
            n as isize,
            1,
            1.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

#[cfg(feature = "openblas")]
mod openblas {
    #[link(name = "openblas")]
    extern "C" {
        #[allow(clippy::too_many_arguments)]
        pub fn cblas_dgemm(
            order: i32,
            transa: i32,
            transb: i32,
            m: i32,
            n: i32,
            k: i32,
            alpha: f64,
            a: *const f64,
            lda: i32,
            b: *const f64,
            ldb: i32,
            beta: f64,
            c: *mut f64,
            ldc: i32,
        );
        pub fn openblas_set_num_threads(n: i32);
    }
}

/// C += A x B for row-major n x n blocks, on one core (system OpenBLAS).
#[cfg(feature = "openblas")]
pub fn gemm_acc(n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    assert!(a.len() >= n * n && b.len() >= n * n && c.len() >= n * n);
    let n = i32::try_from(n).expect("block order fits in i32");
    // SAFETY: row-major (101), no transposes (111), n*n elements in each slice (checked).
    unsafe {
        openblas::openblas_set_num_threads(1);
        openblas::cblas_dgemm(
            101,
            111,
            111,
            n,
            n,
            n,
            1.0,
            a.as_ptr(),
            n,
            b.as_ptr(),
            n,
            1.0,
            c.as_mut_ptr(),
            n,
        );
    }
}

pub fn to_bytes(v: &[f64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 8);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

pub fn from_bytes(b: &[u8]) -> Result<Vec<f64>, CommError> {
    if !b.len().is_multiple_of(8) {
        return Err(CommError::Protocol(
            "matrix block is not a whole number of doubles".into(),
        ));
    }
    Ok(b.chunks_exact(8)
        .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

/// Run Fox's algorithm on all ranks of `comm`.
pub fn multiply(comm: &Comm, cfg: &PmmOptions) -> Result<PmmResult, PmmError> {
    let p = comm.size();
    cfg.check()
        .and_then(|()| cfg.check_procs(p))
        .map_err(|e| PmmError::Config(e.to_string()))?;
    let q = pmm_grid_side(p).unwrap_or(1);
    let m = cfg.size / q;
    let kernel_time = emulated_step(cfg.emulate_gflops, m)?;
    let world = comm.world();
    let mut fox = FoxRank::new(comm.rank(), q, m, kernel_time);

    collectives::barrier(comm, &world)?;
    let start = Instant::now();
    let t = fox.steps(comm, cfg.bcast)?;
    collectives::barrier(comm, &world)?;
    let seconds = start.elapsed().as_secs_f64();

    let (verification, verified) = match cfg.emulate_gflops {
        None => verify(comm, &world, cfg.size, q, m, &fox.c)?,
        Some(g) => verify_blocks(comm, &world, (fox.i, fox.j), q, m, &t.received, g)?,
    };
    let max_compute = collectives::allreduce_max_f64(comm, &world, t.compute)?;
    let max_comm = collectives::allreduce_max_f64(comm, &world, t.bcast + t.roll)?;
    let flops_per_rank = 2.0 * (m as f64).powi(3) * q as f64;
    let elements = if q > 1 {
        (2 * q - 1) as f64 * (m * m) as f64
    } else {
        0.0
    };
    Ok(PmmResult {
        workload: "pmm",
        size: cfg.size,
        procs: p,
        grid: q,
        block: m,
        bcast: cfg.bcast.to_string(),
        kernel: if cfg.emulate_gflops.is_some() {
            "emulated"
        } else {
            KERNEL
        },
        emulate_gflops: cfg.emulate_gflops,
        seconds,
        compute_seconds: t.compute,
        bcast_seconds: t.bcast,
        roll_seconds: t.roll,
        max_compute_seconds: max_compute,
        max_comm_seconds: max_comm,
        gflops: 2.0 * (cfg.size as f64).powi(3) / seconds / 1e9,
        tflops: t.compute / flops_per_rank,
        tcomm: if elements > 0.0 {
            (t.bcast + t.roll) / elements
        } else {
            0.0
        },
        verification,
        verified,
    })
}

/// With `emulate_gflops`: the sleep that stands for one step's kernel on m x m blocks,
/// refused when it is not a number or longer than [`EMULATED_STEP_MAX_S`].
fn emulated_step(emulate_gflops: Option<f64>, m: usize) -> Result<Option<Duration>, PmmError> {
    match emulate_gflops {
        None => Ok(None),
        Some(g) => {
            let secs = emulation::pmm_step_seconds(m, g);
            if secs.is_nan() || secs > EMULATED_STEP_MAX_S {
                return Err(PmmError::Config(format!(
                    "at {g} GFLOP/s one step on {m} x {m} blocks would sleep {secs:.3e} s (at most {EMULATED_STEP_MAX_S} s): raise the rate or lower the size"
                )));
            }
            Ok(Some(Duration::from_secs_f64(secs)))
        }
    }
}

/// One rank of the q x q grid: its position (i, j), its process row, its blocks of A, B
/// and C, and the kernel's sleep when compute is emulated.
struct FoxRank {
    q: usize,
    m: usize,
    i: usize,
    j: usize,
    row: Group,
    a: Vec<f64>,
    /// `a` as it is broadcast.
    a_bytes: Vec<u8>,
    b: Vec<f64>,
    /// Empty when compute is emulated.
    c: Vec<f64>,
    kernel_time: Option<Duration>,
}

/// This rank's time in the kernel, broadcasts and rolls (s), and with emulated compute
/// the checksums of the blocks it received.
struct StepTimes {
    compute: f64,
    bcast: f64,
    roll: f64,
    /// Emulated: per step, the checksum of the A block used, then of B after the roll.
    received: Vec<f64>,
}

impl FoxRank {
    /// Rank `me`'s blocks of A and B, and C zeroed (empty when emulating).
    fn new(me: usize, q: usize, m: usize, kernel_time: Option<Duration>) -> FoxRank {
        let (i, j) = (me / q, me % q);
        let row = Group::new((0..q).map(|c| i * q + c).collect(), me);
        let a = block(m, i, j, a_entry);
        let b = block(m, i, j, b_entry);
        let c = vec![0.0f64; if kernel_time.is_some() { 0 } else { m * m }];
        let a_bytes = to_bytes(&a);
        FoxRank {
            q,
            m,
            i,
            j,
            row,
            a,
            a_bytes,
            b,
            c,
            kernel_time,
        }
    }

    /// The q steps: broadcast A along the row, multiply (or sleep), roll B up the column.
    fn steps(&mut self, comm: &Comm, bcast: Bcast) -> Result<StepTimes, PmmError> {
        let (q, m, i, j) = (self.q, self.m, self.i, self.j);
        let mut times = StepTimes {
            compute: 0.0,
            bcast: 0.0,
            roll: 0.0,
            received: Vec::new(),
        };
        for k in 0..q {
            let root = (i + k) % q;
            let t = Instant::now();
            let data = if j == root {
                self.a_bytes.clone()
            } else {
                Vec::new()
            };
            let got = collectives::bcast(comm, &self.row, root, data, bcast)?;
            let a_k = if j == root {
                None
            } else {
                Some(from_bytes(&got)?)
            };
            times.bcast += t.elapsed().as_secs_f64();

            let t = Instant::now();
            match self.kernel_time {
                None => gemm_acc(m, a_k.as_deref().unwrap_or(&self.a), &self.b, &mut self.c),
                Some(d) => {
                    times
                        .received
                        .push(checksum(a_k.as_deref().unwrap_or(&self.a)));
                    std::thread::sleep(d);
                }
            }
            times.compute += t.elapsed().as_secs_f64();

            if q > 1 && k + 1 < q {
                let t = Instant::now();
                let up = ((i + q - 1) % q) * q + j;
                let down = ((i + 1) % q) * q + j;
                comm.send(up, TAG_ROLL, &to_bytes(&self.b))?;
                self.b = from_bytes(&comm.recv(down, TAG_ROLL)?)?;
                times.roll += t.elapsed().as_secs_f64();
                if self.kernel_time.is_some() {
                    times.received.push(checksum(&self.b));
                }
            }
        }
        Ok(times)
    }
}

/// Check C: against a serial product for small M, by the checksum identity
/// sum(C) = sum_k colsum(A)_k * rowsum(B)_k otherwise.
fn verify(
    comm: &Comm,
    world: &Group,
    size: usize,
    q: usize,
    m: usize,
    c: &[f64],
) -> Result<(String, bool), PmmError> {
    if size <= SERIAL_CHECK_MAX {
        let blocks = collectives::gatherv(comm, world, 0, &to_bytes(c))?;
        if comm.rank() != 0 {
            return Ok(broadcast_verdict(comm, world, None)?);
        }
        let a = block(size, 0, 0, a_entry);
        let b = block(size, 0, 0, b_entry);
        let mut want = vec![0.0; size * size];
        gemm_acc(size, &a, &b, &mut want);
        let mut worst = 0.0f64;
        for (rank, bytes) in blocks.iter().enumerate() {
            let got = from_bytes(bytes)?;
            let (bi, bj) = (rank / q, rank % q);
            for r in 0..m {
                for col in 0..m {
                    let w = want[(bi * m + r) * size + bj * m + col];
                    worst = worst.max((got[r * m + col] - w).abs());
                }
            }
        }
        let ok = worst <= 1e-9 * size as f64;
        let text = format!("serial product: max abs difference {worst:.3e}");
        return Ok(broadcast_verdict(comm, world, Some((text, ok)))?);
    }
    let local: f64 = c.iter().sum();
    let total = collectives::allreduce_sum_f64(comm, world, local)?;
    let mut want = 0.0;
    for k in 0..size {
        let colsum_a: f64 = (0..size).map(|r| a_entry(r, k)).sum();
        let rowsum_b: f64 = (0..size).map(|col| b_entry(k, col)).sum();
        want += colsum_a * rowsum_b;
    }
    let rel = (total - want).abs() / want.abs().max(1e-300);
    Ok((
        format!("checksum identity: relative error {rel:.3e}"),
        rel <= 1e-9,
    ))
}

/// A position-weighted sum: a block with entries moved or changed sums differently.
fn checksum(v: &[f64]) -> f64 {
    v.iter()
        .enumerate()
        .map(|(k, x)| x * (1.0 + (k % 1021) as f64 / 1021.0))
        .sum()
}

/// Emulated compute: check that rank (i, j) received, in step k, the A block of column
/// (i + k) mod q and, after each roll, the B block of row (i + k + 1) mod q; every rank
/// learns how many blocks were wrong anywhere.
fn verify_blocks(
    comm: &Comm,
    world: &Group,
    (i, j): (usize, usize),
    q: usize,
    m: usize,
    received: &[f64],
    gflops: f64,
) -> Result<(String, bool), PmmError> {
    let mut want = Vec::with_capacity(2 * q);
    for k in 0..q {
        want.push(checksum(&block(m, i, (i + k) % q, a_entry)));
        if q > 1 && k + 1 < q {
            want.push(checksum(&block(m, (i + k + 1) % q, j, b_entry)));
        }
    }
    let wrong = if received.len() == want.len() {
        received
            .iter()
            .zip(&want)
            .filter(|(got, w)| (*got - *w).abs() > 1e-9 * (1.0 + w.abs()))
            .count()
    } else {
        want.len().max(1)
    };
    let wrong = collectives::allreduce_sum_f64(comm, world, wrong as f64)?;
    Ok((
        format!(
            "compute emulated at {gflops} GFLOP/s per node (no product): {wrong} of {} received blocks wrong",
            want.len() * comm.size()
        ),
        wrong == 0.0,
    ))
}

fn broadcast_verdict(
    comm: &Comm,
    world: &Group,
    verdict: Option<(String, bool)>,
) -> Result<(String, bool), CommError> {
    let bytes = match &verdict {
        Some((t, ok)) => {
            let mut b = vec![*ok as u8];
            b.extend_from_slice(t.as_bytes());
            b
        }
        None => Vec::new(),
    };
    let got = collectives::bcast(comm, world, 0, bytes, Bcast::Binomial)?;
    let ok = got.first() == Some(&1);
    let text = String::from_utf8_lossy(got.get(1..).unwrap_or_default()).into_owned();
    Ok((text, ok))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::run_local;

    #[test]
    fn fox_is_correct_for_flat_binomial_and_pipelined_on_1_4_9_ranks() {
        for p in [1usize, 4, 9] {
            for algo in [Bcast::Flat, Bcast::Binomial, Bcast::Pipelined] {
                let res = run_local(p, move |c| {
                    multiply(
                        &c,
                        &PmmOptions {
                            size: 36,
                            bcast: algo,
                            emulate_gflops: None,
                        },
                    )
                    .unwrap()
                });
                for r in &res {
                    assert!(r.verified, "p={p} {algo}: {}", r.verification);
                    assert!(r.verification.contains("serial"));
                }
            }
        }
    }

    #[test]
    fn large_matrices_use_the_checksum_identity() {
        let res = run_local(4, |c| {
            multiply(
                &c,
                &PmmOptions {
                    size: SERIAL_CHECK_MAX + 4,
                    bcast: Bcast::Binomial,
                    emulate_gflops: None,
                },
            )
            .unwrap()
        });
        assert!(res[0].verified, "{}", res[0].verification);
        assert!(res[0].verification.contains("checksum"));
    }

    #[test]
    fn a_wrong_product_is_caught() {
        // Corrupt C by running with a different B on one rank: emulate by checking that
        // the verifier rejects a perturbed block.
        let res = run_local(1, |c| {
            let world = c.world();
            let size = 8;
            let a = block(size, 0, 0, a_entry);
            let b = block(size, 0, 0, b_entry);
            let mut prod = vec![0.0; size * size];
            gemm_acc(size, &a, &b, &mut prod);
            prod[5] += 1e-3;
            verify(&c, &world, size, 1, size, &prod).unwrap()
        });
        assert!(!res[0].1, "{}", res[0].0);
    }

    #[test]
    fn refuses_non_square_grids_and_indivisible_sizes() {
        let res = run_local(2, |c| {
            multiply(
                &c,
                &PmmOptions {
                    size: 8,
                    bcast: Bcast::Flat,
                    emulate_gflops: None,
                },
            )
            .unwrap_err()
            .to_string()
        });
        assert!(res[0].contains("square"), "{}", res[0]);
        let res = run_local(4, |c| {
            multiply(
                &c,
                &PmmOptions {
                    size: 9,
                    bcast: Bcast::Flat,
                    emulate_gflops: None,
                },
            )
            .unwrap_err()
            .to_string()
        });
        assert!(res[0].contains("multiple"), "{}", res[0]);
    }

    #[test]
    fn emulated_compute_sleeps_the_kernel_time_and_checks_every_block() {
        // M = 64 on 2 x 2: blocks of 32, 2 x 32^3 = 65536 flops per step, 2 steps; at
        // 0.0001 GFLOP/s that is 0.655 s per step, 1.31 s in all.
        for algo in [Bcast::Flat, Bcast::Binomial, Bcast::Pipelined] {
            let res = run_local(4, move |c| {
                multiply(
                    &c,
                    &PmmOptions {
                        size: 64,
                        bcast: algo,
                        emulate_gflops: Some(0.0001),
                    },
                )
                .unwrap()
            });
            for r in &res {
                assert!(r.verified, "{algo}: {}", r.verification);
                assert!(r.verification.contains("0 of 12"), "{}", r.verification);
                assert_eq!(r.kernel, "emulated");
                assert!(
                    (1.3..3.0).contains(&r.compute_seconds),
                    "{}",
                    r.compute_seconds
                );
                assert!(r.seconds >= r.compute_seconds);
            }
        }
    }

    #[test]
    fn emulated_compute_catches_a_wrong_block_and_refuses_bad_rates() {
        let res = run_local(4, |c| {
            let world = c.world();
            let me = c.rank();
            let (i, j) = (me / 2, me % 2);
            // What rank (i, j) should see, with one block swapped on rank 3.
            let mut got = vec![
                checksum(&block(2, i, i, a_entry)),
                checksum(&block(2, (i + 1) % 2, j, b_entry)),
                checksum(&block(2, i, (i + 1) % 2, a_entry)),
            ];
            if me == 3 {
                got.swap(0, 2);
            }
            verify_blocks(&c, &world, (i, j), 2, 2, &got, 1.0).unwrap()
        });
        for (text, ok) in &res {
            assert!(!ok, "{text}");
            assert!(text.contains("2 of 12"), "{text}");
        }
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 2e6, 1e-300] {
            let res = run_local(1, move |c| {
                multiply(
                    &c,
                    &PmmOptions {
                        size: 8,
                        bcast: Bcast::Flat,
                        emulate_gflops: Some(bad),
                    },
                )
                .unwrap_err()
                .to_string()
            });
            assert!(
                res[0].contains("emulate_gflops must be from"),
                "{bad}: {}",
                res[0]
            );
        }
        // A rate and size whose one step would sleep beyond a day are refused, not slept.
        let res = run_local(1, |c| {
            multiply(
                &c,
                &PmmOptions {
                    size: 100_000,
                    bcast: Bcast::Flat,
                    emulate_gflops: Some(1e-6),
                },
            )
            .unwrap_err()
            .to_string()
        });
        assert!(res[0].contains("would sleep"), "{}", res[0]);
    }
}
