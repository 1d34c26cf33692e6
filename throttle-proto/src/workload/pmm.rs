//! Fox's parallel matrix multiplication (`throttle-pmm`): its options and their limits.

use serde::{Deserialize, Serialize};

use super::{push_flag, OptionsError};
use crate::emulation;

/// Matrix order when none is given.
pub const DEFAULT_SIZE: usize = 1024;

/// How a row of the process grid broadcasts its block.
/// Largest M the program checks against a full serial product (larger: by the checksum
/// identity).
pub const SERIAL_CHECK_MAX: usize = 1024;

#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum Bcast {
    /// The root sends to every other rank of the row.
    Flat,
    /// A binomial tree: ceil(log2 q) rounds.
    #[default]
    Binomial,
    /// The block is cut into chunks passed along the row.
    Pipelined,
}

impl Bcast {
    pub const ALL: [Bcast; 3] = [Bcast::Flat, Bcast::Binomial, Bcast::Pipelined];

    pub fn as_str(self) -> &'static str {
        match self {
            Bcast::Flat => "flat",
            Bcast::Binomial => "binomial",
            Bcast::Pipelined => "pipelined",
        }
    }
}

impl std::fmt::Display for Bcast {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Bcast {
    type Err = String;
    fn from_str(s: &str) -> Result<Bcast, String> {
        Bcast::ALL
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| format!("broadcast `{s}` is not flat, binomial or pipelined"))
    }
}

/// `throttle-pmm`'s options: C = A x B of order `size` on a q x q grid of ranks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default)]
pub struct PmmOptions {
    /// Matrix order M (a multiple of the grid side q, where q x q = processes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_SIZE))]
    pub size: usize,
    /// Row broadcast.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = Bcast::Binomial))]
    pub bcast: Bcast,
    /// Sleep for the time a node computing at this many GFLOP/s would take, instead of
    /// multiplying (each rank stands for a node with its own CPU; the received blocks are
    /// checked instead of the product).
    #[cfg_attr(feature = "clap", arg(long, value_name = "GFLOPS"))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulate_gflops: Option<f64>,
}

impl Default for PmmOptions {
    fn default() -> Self {
        PmmOptions {
            size: DEFAULT_SIZE,
            bcast: Bcast::Binomial,
            emulate_gflops: None,
        }
    }
}

impl PmmOptions {
    pub fn check(&self) -> Result<(), OptionsError> {
        if self.size == 0 {
            return Err(OptionsError::new(
                "pmm size must be a positive matrix order",
            ));
        }
        if let Some(g) = self.emulate_gflops {
            emulation::PMM_GFLOPS
                .check(g)
                .map_err(|why| OptionsError(format!("pmm emulate_gflops {why}")))?;
        }
        Ok(())
    }

    /// Fox's algorithm needs a square grid whose side divides the matrix order.
    pub fn check_procs(&self, procs: usize) -> Result<(), OptionsError> {
        let q = grid_side(procs).ok_or_else(|| {
            OptionsError(format!(
                "pmm needs a square number of processes (1, 4, 9, 16, 25, ...): {procs} is not"
            ))
        })?;
        if !self.size.is_multiple_of(q) {
            return Err(OptionsError(format!(
                "pmm size {} is not a multiple of {q}, the grid side for {procs} processes",
                self.size
            )));
        }
        Ok(())
    }

    pub fn to_args(&self) -> Vec<String> {
        let mut a = Vec::new();
        push_flag(&mut a, "--size", self.size);
        push_flag(&mut a, "--bcast", self.bcast);
        if let Some(g) = self.emulate_gflops {
            push_flag(&mut a, "--emulate-gflops", g);
        }
        a
    }
}

/// q when `procs` = q x q (q >= 1).
pub fn grid_side(procs: usize) -> Option<usize> {
    let q = (procs as f64).sqrt().round() as usize;
    (q >= 1 && q * q == procs).then_some(q)
}
