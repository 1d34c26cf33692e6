//! How much memory a workload's ranks hold on one node, so that a size whose parts fit one
//! by one but not together is refused before it runs, with the figure, instead of bringing
//! the OOM killer onto a node other users share (issue 55: `pmm --size 35000` passed every
//! check and would have asked for tens of GB).
//!
//! The estimates count what each program keeps at once, rounded up, from its code: they
//! are meant to refuse what cannot fit, not to plan to the megabyte, and a refusal says
//! "about". The controller checks a local cluster's ranks against this machine before a
//! run; each rank checks its own node as it starts ([`check`], against what the `os`
//! feature's `os::memory::available` reads).

use super::{Options, OptionsError};

/// The most memory the ranks of one node hold at once, bytes: `procs` ranks in all,
/// `ranks` of them on this node, rank 0 among them (the busiest node). `None` for a
/// program the agents do not know (its memory is its own business).
pub fn per_node(options: &Options, procs: usize, ranks: usize) -> Option<u64> {
    let procs = procs.max(1) as f64;
    let ranks = ranks.clamp(1, procs as usize) as f64;
    let bytes = match options {
        Options::Pmm(o) => {
            // Each rank's blocks of order m = M / q: A, A as sent, B and C (none when
            // compute is emulated), and the A and B blocks it receives, each framed once
            // more on the way: 8 blocks of 8 bytes an entry. Rank 0 checks a small product
            // against a serial one (A, B, the product and the gathered C: 4 M^2 entries).
            let q = procs.sqrt().floor().max(1.0);
            let m = (o.size as f64 / q).ceil();
            let blocks = if o.emulate_gflops.is_some() { 7.0 } else { 8.0 };
            let serial = if o.size <= crate::workload::pmm::SERIAL_CHECK_MAX {
                4.0 * 8.0 * (o.size as f64).powi(2)
            } else {
                0.0
            };
            ranks * blocks * 8.0 * m * m + serial
        }
        Options::Bfs(o) => {
            // Every rank keeps arrays over all vertices (visited, degrees, parents: 16
            // bytes a vertex) and its share of the edges, twice (as generated and as its
            // compressed rows, both directions: 32 bytes an edge).
            let vertices = 2f64.powi(o.scale as i32);
            let edges = vertices * o.edge_factor as f64;
            ranks * (16.0 * vertices + 32.0 * edges / procs)
        }
        Options::Mw(o) => {
            // The master sends each iteration's volume and receives it back; a worker
            // its share. Three copies each (built, framed, buffered by the receiver).
            let workers = (procs - 1.0).max(1.0);
            let v = o.volume as f64;
            3.0 * v + (ranks - 1.0) * 3.0 * v / workers
        }
        Options::LogGps(o) => {
            // A receiver may buffer a whole train of the largest message per peer.
            let largest = o.sizes.iter().copied().max().unwrap_or(0) as f64;
            ranks * largest * (o.train as f64).min(1024.0) * 2.0
        }
        Options::Program(_) | Options::Command(_) => return None,
    };
    // Each rank's program and runtime, besides its data.
    Some((bytes + ranks * 16.0 * 1024.0 * 1024.0).min(u64::MAX as f64) as u64)
}

/// Refuse `options` on `procs` ranks when the `ranks` of one node need more than
/// `available` bytes, with both figures.
pub fn check(
    options: &Options,
    procs: usize,
    ranks: usize,
    available: u64,
) -> Result<(), OptionsError> {
    let Some(need) = per_node(options, procs, ranks) else {
        return Ok(());
    };
    if need <= available {
        return Ok(());
    }
    Err(OptionsError(format!(
        "{} on {procs} process(es) needs about {} of memory on a node running {ranks} of them, and {} is available there: choose a smaller {} or more nodes",
        options.name(),
        gib(need),
        gib(available),
        match options {
            Options::Pmm(_) => "matrix order (--size)",
            Options::Bfs(_) => "scale",
            Options::Mw(_) => "volume",
            _ => "message size",
        }
    )))
}

/// `bytes` as GiB with one decimal, as the refusals say it.
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{BfsOptions, MwOptions, PmmOptions};

    #[test]
    fn a_size_that_fits_block_by_block_but_not_together_is_refused_with_its_figure() {
        let pmm = |size| {
            Options::Pmm(PmmOptions {
                size,
                ..PmmOptions::default()
            })
        };
        // The finding: M = 35,000 on 4 ranks of one machine: blocks of 17,500^2 entries,
        // 2.4 GB each, eight of them per rank.
        let need = per_node(&pmm(35_000), 4, 4).unwrap();
        assert!(need > 70_000_000_000 && need < 100_000_000_000, "{need}");
        let e = check(&pmm(35_000), 4, 4, 24 << 30)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("needs about") && e.contains("24.0 GiB is available"),
            "{e}"
        );
        // The defaults fit a small machine; more nodes make a node's share smaller.
        assert!(check(&Options::Pmm(PmmOptions::default()), 4, 4, 1 << 30).is_ok());
        assert!(per_node(&pmm(35_000), 100, 1).unwrap() < need / 20);
        let bfs = |scale| {
            Options::Bfs(BfsOptions {
                scale,
                ..BfsOptions::default()
            })
        };
        assert!(check(&bfs(14), 8, 8, 1 << 30).is_ok());
        assert!(check(&bfs(30), 8, 1, 64 << 30).is_err());
        let mw = Options::Mw(MwOptions {
            volume: 16 << 30,
            ..MwOptions::default()
        });
        assert!(check(&mw, 2, 2, 24 << 30).is_err());
        let program = Options::Program(crate::workload::ProgramOptions {
            name: "app".into(),
            args: Vec::new(),
        });
        assert!(per_node(&program, 4, 4).is_none());
    }
}
