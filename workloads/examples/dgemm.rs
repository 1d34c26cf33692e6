//! Single-core dgemm throughput of the PMM kernel (matrixmultiply, or OpenBLAS with --features openblas), for `bench/dgemm.sh`.
//! Usage: dgemm [N] [REPEATS] -> prints `matrixmultiply N GFLOP/s` (best of REPEATS).

use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2048);
    let reps: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let a: Vec<f64> = (0..n * n).map(|i| (i % 97) as f64 / 97.0).collect();
    let b: Vec<f64> = (0..n * n).map(|i| (i % 89) as f64 / 89.0).collect();
    let mut c = vec![0.0; n * n];
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        workloads::pmm::gemm_acc(n, &a, &b, &mut c);
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{} {n} {:.2}",
        workloads::pmm::KERNEL,
        2.0 * (n as f64).powi(3) / best / 1e9
    );
}
