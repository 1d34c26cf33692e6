//! A master/worker program (the master/worker thesis; Mizutani et al.): rank 0 hands each iteration's data
//! out to the workers, they compute, and the master gathers their results.
//!
//! One iteration, as the thesis's model (its expression 3) describes it with n = P - 1
//! workers: the master sends every worker its share of the data, alpha V / n bytes, one
//! message each, without waiting (asynchronous sends); each worker computes for Tc / n
//! seconds and returns (1 - alpha) V / n bytes; the iteration ends when the master holds
//! every result (taken in arrival order, `recv_any`). With one rank the master computes
//! Tc itself. One unrecorded warm-up iteration, then `iterations` timed ones; the
//! reported time is their median.
//!
//! The work is `sleep` by default: each worker stands for a node with its own CPU, and
//! on a local cluster with more ranks than cores a busy loop would measure the host's
//! scheduler instead. `spin` burns the CPU for the same wall time.

use std::time::{Duration, Instant};

use serde::Serialize;

use throttle_proto::workload::{MwOptions, MwWork};

use crate::comm::{collectives, Comm, CommError};
use crate::stats::median;

const TAG_TASK: u32 = 60;
const TAG_RESULT: u32 = 61;

#[derive(Clone, Debug, Serialize)]
pub struct MwResult {
    pub workers: usize,
    pub volume: u64,
    pub alpha: f64,
    pub compute_seconds: f64,
    pub iterations: usize,
    pub work: MwWork,
    /// Median, fastest and slowest iteration, seconds.
    pub iteration_seconds: f64,
    pub min_iteration_seconds: f64,
    pub max_iteration_seconds: f64,
}

impl MwResult {
    pub fn report(&self) -> throttle_proto::result::WorkloadResult {
        use throttle_proto::result::{Check, WorkloadResult};
        WorkloadResult {
            workload: "mw".into(),
            seconds: Some(self.iteration_seconds),
            check: Check::Passed,
            metrics: [
                ("workers", self.workers as f64),
                ("volume", self.volume as f64),
                ("alpha", self.alpha),
                ("compute_seconds", self.compute_seconds),
                ("iteration_seconds", self.iteration_seconds),
                ("min_iteration_seconds", self.min_iteration_seconds),
                ("max_iteration_seconds", self.max_iteration_seconds),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            detail: serde_json::to_value(self).unwrap_or_default(),
        }
    }
}

/// Bytes of one task and of one result with `workers` workers.
pub fn shares(options: &MwOptions, workers: usize) -> (usize, usize) {
    let n = workers.max(1) as f64;
    let v = options.volume as f64;
    (
        (options.alpha * v / n).round() as usize,
        ((1.0 - options.alpha) * v / n).round() as usize,
    )
}

fn work(kind: MwWork, seconds: f64) {
    if seconds <= 0.0 {
        return;
    }
    match kind {
        MwWork::Sleep => std::thread::sleep(Duration::from_secs_f64(seconds)),
        MwWork::Spin => {
            let t = Instant::now();
            let mut x = 1u64;
            while t.elapsed().as_secs_f64() < seconds {
                for _ in 0..1000 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
                std::hint::black_box(x);
            }
        }
    }
}

/// Run the program on every rank; rank 0 gets the result.
pub fn run(comm: &Comm, cfg: &MwOptions) -> Result<Option<MwResult>, CommError> {
    cfg.check().map_err(|e| CommError::Setup(e.to_string()))?;
    let rank = comm.rank();
    let workers = comm.size() - 1;
    let (task, result) = shares(cfg, workers);
    let world = comm.world();
    collectives::barrier(comm, &world)?;
    let mut times = Vec::with_capacity(cfg.iterations as usize);
    for i in 0..=cfg.iterations {
        if rank == 0 {
            let t = Instant::now();
            if workers == 0 {
                work(cfg.work, cfg.compute_seconds);
            } else {
                let data = vec![5u8; task];
                for w in 1..=workers {
                    comm.send(w, TAG_TASK, &data)?;
                }
                for _ in 0..workers {
                    let (_, r) = comm.recv_any(TAG_RESULT)?;
                    if r.len() != result {
                        return Err(CommError::Protocol(format!(
                            "a result of {} bytes, expected {result}",
                            r.len()
                        )));
                    }
                }
            }
            if i > 0 {
                times.push(t.elapsed().as_secs_f64());
            }
        } else {
            let data = comm.recv(0, TAG_TASK)?;
            if data.len() != task {
                return Err(CommError::Protocol(format!(
                    "a task of {} bytes, expected {task}",
                    data.len()
                )));
            }
            work(cfg.work, cfg.compute_seconds / workers as f64);
            comm.send(0, TAG_RESULT, &vec![6u8; result])?;
        }
    }
    collectives::barrier(comm, &world)?;
    if rank != 0 {
        return Ok(None);
    }
    let fastest = times.iter().copied().fold(f64::INFINITY, f64::min);
    let slowest = times.iter().copied().fold(0.0, f64::max);
    Ok(Some(MwResult {
        workers,
        volume: cfg.volume,
        alpha: cfg.alpha,
        compute_seconds: cfg.compute_seconds,
        iterations: cfg.iterations as usize,
        work: cfg.work,
        min_iteration_seconds: fastest,
        max_iteration_seconds: slowest,
        iteration_seconds: median(times),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::run_local;

    fn cfg(compute_seconds: f64) -> MwOptions {
        MwOptions {
            volume: 40_000,
            alpha: 0.75,
            compute_seconds,
            iterations: 3,
            work: MwWork::Sleep,
        }
    }

    #[test]
    fn the_work_is_shared_among_the_workers() {
        let one = run_local(1, |c| run(&c, &cfg(0.2)).unwrap());
        let five = run_local(5, |c| run(&c, &cfg(0.2)).unwrap());
        let t1 = one[0].as_ref().unwrap().iteration_seconds;
        let r5 = five[0].as_ref().unwrap();
        assert_eq!(r5.workers, 4);
        assert!(five[1..].iter().all(|r| r.is_none()));
        assert!((0.19..0.4).contains(&t1), "{t1}");
        // 4 workers: 0.05 s each, in parallel.
        assert!(
            (0.045..0.15).contains(&r5.iteration_seconds),
            "{}",
            r5.iteration_seconds
        );
    }

    #[test]
    fn shares_split_the_volume_and_bad_settings_are_refused() {
        let c = cfg(1.0);
        assert_eq!(shares(&c, 4), (7_500, 2_500));
        assert_eq!(shares(&c, 0), (30_000, 10_000));
        for bad in [
            MwOptions {
                alpha: 1.5,
                ..cfg(1.0)
            },
            MwOptions {
                alpha: f64::NAN,
                ..cfg(1.0)
            },
            MwOptions {
                iterations: 0,
                ..cfg(1.0)
            },
            cfg(-1.0),
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
