//! The Fox PMM model's tests: its factors against the paper's table, the broadcast trees,
//! and a comparison with runs that follow the model.

use super::*;

fn shape(size: usize, grid: usize, bcast: Bcast) -> PmmShape {
    PmmShape { size, grid, bcast }
}

#[test]
fn the_factors_reproduce_the_papers_table_3_coefficients() {
    // Table 3 lists Tflops and Tcomm as rates (per second) and the model as
    // a M^2 + b M^3; a = c(q) / q * Tcomm (q steps of (M/q)^2 elements), b = 2 / (N F).
    let rows = [
        // (grid, bcast, elements per second, flops per second, a, b)
        (5, Bcast::Flat, 8.87e6, 8.64e9, 6.764e-8, 9.259e-12), // Dryad Tempest 25x1
        (10, Bcast::Flat, 6.17e6, 6.98e9, 8.913e-8, 2.865e-12), // Dryad Azure 100x1
        (5, Bcast::Binomial, 10.73e6, 8.64e9, 3.727e-8, 9.259e-12), // MS.MPI 1 Gbps
        (5, Bcast::Binomial, 18.17e6, 8.64e9, 2.205e-8, 9.259e-12), // MS.MPI 20 Gbps
    ];
    for (grid, bcast, comm_rate, flop_rate, a, b) in rows {
        let s = shape(1000 * grid, grid, bcast);
        let p = PmmParams {
            tflops: 1.0 / flop_rate,
            tcomm: 1.0 / comm_rate,
            tstartup: 0.0,
        };
        let m = s.size as f64;
        let pred = s.predict(&p);
        let a_model = pred.comm_seconds / (m * m);
        let b_model = pred.compute_seconds / (m * m * m);
        assert!(
            (a_model / a - 1.0).abs() < 0.01,
            "{grid} {bcast}: a {a_model:e} vs {a:e}"
        );
        // Table 3 prints b to 3-4 digits; the Azure row is 2/(100 x 6.98e9) = 2.865e-12.
        assert!(
            (b_model / b - 1.0).abs() < 0.01,
            "{grid} {bcast}: b {b_model:e} vs {b:e}"
        );
    }
}

#[test]
fn overhead_is_linear_in_the_papers_abscissa_with_slope_tcomm_over_tflops() {
    let p = PmmParams {
        tflops: 2e-10,
        tcomm: 8e-8,
        tstartup: 0.0,
    };
    for bcast in [Bcast::Flat, Bcast::Binomial, Bcast::Pipelined] {
        for (size, grid) in [(1200, 2), (1200, 3), (2400, 4), (4800, 8)] {
            let s = shape(size, grid, bcast);
            let t = s.predict(&p).seconds;
            let h = s.parallel_overhead(t, p.tflops);
            let slope = h / s.overhead_abscissa();
            assert!((slope / (p.tcomm / p.tflops) - 1.0).abs() < 1e-9, "{s:?}");
        }
    }
    // The paper's abscissas: q (q + 1) / 4M (flat), q (1 + log2 q) / 4M (binomial).
    let flat = shape(1000, 4, Bcast::Flat).overhead_abscissa();
    assert!((flat - 4.0 * 5.0 / 4000.0).abs() < 1e-15);
    let binomial = shape(1000, 4, Bcast::Binomial).overhead_abscissa();
    assert!((binomial - 4.0 * 3.0 / 4000.0).abs() < 1e-15);
}

#[test]
fn tree_factors_follow_the_broadcast_trees() {
    // Flat: the paper's factor.
    for q in 2..9 {
        let s = shape(100 * q, q, Bcast::Flat);
        assert_eq!(s.tree_transfers_per_step(), s.transfers_per_step());
    }
    // Binomial: q = 2 is the flat tree; q = 3: 0 -> 2, then 0 -> 1; q = 4: 0 -> 2,
    // 0 -> 1 and 2 -> 3.
    assert_eq!(
        shape(200, 2, Bcast::Binomial).tree_transfers_per_step(),
        1.5
    );
    assert_eq!(arrival_times(3, Bcast::Binomial), vec![0.0, 2.0, 1.0]);
    assert_eq!(arrival_times(4, Bcast::Binomial), vec![0.0, 2.0, 1.0, 2.0]);
    assert_eq!(
        arrival_times(8, Bcast::Binomial),
        vec![0.0, 3.0, 2.0, 3.0, 1.0, 3.0, 2.0, 3.0]
    );
    assert_eq!(
        shape(400, 4, Bcast::Binomial).tree_transfers_per_step(),
        2.25
    );
    assert_eq!(
        shape(300, 3, Bcast::Pipelined).tree_transfers_per_step(),
        1.0 + 2.0 / 3.0
    );
}

#[test]
fn one_process_communicates_nothing_and_ceil_log2_counts_rounds() {
    let s = shape(512, 1, Bcast::Flat);
    let p = PmmParams {
        tflops: 1e-9,
        tcomm: 1.0,
        tstartup: 1.0,
    };
    let pred = s.predict(&p);
    assert_eq!(pred.comm_seconds + pred.startup_seconds, 0.0);
    assert!((pred.seconds - 2.0 * 512f64.powi(3) * 1e-9).abs() < 1e-12);
    assert_eq!([1, 2, 3, 4, 5, 8, 9].map(ceil_log2), [0, 1, 2, 2, 3, 3, 4]);
    assert_eq!(s.tflops_from_compute(pred.compute_seconds), 1e-9);
}

fn run(size: usize, grid: usize, pct: f64, p: &PmmParams, slow: f64) -> PmmRun {
    let shape = shape(size, grid, Bcast::Binomial);
    let pred = shape.predict(p);
    PmmRun {
        shape,
        ranks_per_node: 1,
        pct: Pct::new(pct).unwrap(),
        capacity: 1.25e8,
        seconds: pred.seconds * slow,
        max_compute_seconds: Some(pred.compute_seconds),
    }
}

#[test]
fn runs_that_follow_the_model_compare_exactly_and_a_slow_link_shows() {
    let nominal = |tcomm: f64| LinkCost {
        tcomm,
        tstartup: 0.0,
        source: "nominal".into(),
    };
    let at = |pct: f64| PmmParams {
        tflops: 2e-10,
        tcomm: 8.0 / (pct / 100.0 * 1.25e8),
        tstartup: 0.0,
    };
    let mut runs = Vec::new();
    for pct in [100.0, 20.0] {
        for (size, grid) in [(1024, 1), (1024, 2), (1536, 3), (2048, 4)] {
            runs.push(run(size, grid, pct, &at(pct), 1.0));
        }
    }
    let link = |p: Pct, c: f64| Some(nominal(8.0 / (p.percent()? / 100.0 * c)));
    let c = compare(&runs, link);
    assert_eq!(c.rows.len(), 8);
    assert!(c.max_abs_error_where_assumptions_hold.unwrap() < 1e-9);
    assert!(c
        .rows
        .iter()
        .filter(|r| r.shape.grid == 1)
        .all(|r| r.caveat.is_some()));
    assert_eq!(c.checks.len(), 2);
    for k in &c.checks {
        assert!(k.error.abs() < 1e-9 && k.r2 > 0.999, "{k:?}");
    }
    // The same runs, but the link at 20% is 30% slower than the model thinks.
    let mut slow = Vec::new();
    for (size, grid) in [(1024, 2), (1536, 3), (2048, 4)] {
        let mut p = at(20.0);
        p.tcomm *= 1.3;
        slow.push(run(size, grid, 20.0, &p, 1.0));
    }
    let c = compare(&slow, link);
    assert!(c.max_abs_error_where_assumptions_hold.unwrap() > 0.05);
    assert!(
        (c.checks[0].error + 1.0 - 1.3).abs() < 1e-6,
        "{:?}",
        c.checks[0]
    );
}
