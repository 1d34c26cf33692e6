//! Graph500-style breadth-first search (`throttle-bfs`): its options and their limits.

use serde::{Deserialize, Serialize};

use super::{push_flag, OptionsError};
use crate::emulation;

/// The generator seed when none is given (the Graph500 reference's graphs are seeded too).
pub const DEFAULT_SEED: u64 = 1;

/// `throttle-bfs`'s options: a Kronecker graph of 2^scale vertices searched from `keys`
/// roots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default)]
pub struct BfsOptions {
    /// Graph scale: 2^SCALE vertices (1 to 30).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 16))]
    pub scale: u32,
    /// Edges per vertex.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 16))]
    pub edge_factor: u32,
    /// Generator seed.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_SEED))]
    #[serde(skip_serializing_if = "is_default_seed")]
    pub seed: u64,
    /// Number of search keys (Graph500: 64).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 64))]
    pub keys: usize,
    /// Validate every search (untimed). A sweep's runs skip it unless its `[bfs]` says
    /// `validate = true`: `run` checks the program, a sweep measures it.
    #[cfg_attr(
        feature = "clap",
        arg(
            long = "no-validate",
            action = clap::ArgAction::SetFalse,
            help = "Skip validating every search (faster)"
        )
    )]
    #[serde(default = "no")]
    pub validate: bool,
    /// Emulate compute: every level's local step lasts as long as on a node scanning this
    /// many million edges per second (the search itself stays real and validated).
    #[cfg_attr(feature = "clap", arg(long, value_name = "MEPS"))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulate_meps: Option<f64>,
}

fn no() -> bool {
    false
}

fn is_default_seed(seed: &u64) -> bool {
    *seed == DEFAULT_SEED
}

impl Default for BfsOptions {
    fn default() -> Self {
        BfsOptions {
            scale: 16,
            edge_factor: 16,
            seed: DEFAULT_SEED,
            keys: 64,
            validate: true,
            emulate_meps: None,
        }
    }
}

impl BfsOptions {
    pub fn check(&self) -> Result<(), OptionsError> {
        if !(1..=30).contains(&self.scale) {
            return Err(OptionsError(format!(
                "bfs scale must be from 1 to 30, not {}",
                self.scale
            )));
        }
        if self.edge_factor == 0 || self.keys == 0 {
            return Err(OptionsError::new(
                "bfs edge_factor and keys must be at least 1",
            ));
        }
        if let Some(r) = self.emulate_meps {
            emulation::BFS_MEPS
                .check(r)
                .map_err(|why| OptionsError(format!("bfs emulate_meps {why}")))?;
        }
        Ok(())
    }

    /// Any number of processes: the graph is partitioned over a near-square grid.
    pub fn check_procs(&self, procs: usize) -> Result<(), OptionsError> {
        super::at_least("bfs", procs, 1)
    }

    pub fn to_args(&self) -> Vec<String> {
        let mut a = Vec::new();
        push_flag(&mut a, "--scale", self.scale);
        push_flag(&mut a, "--edge-factor", self.edge_factor);
        if self.seed != DEFAULT_SEED {
            push_flag(&mut a, "--seed", self.seed);
        }
        push_flag(&mut a, "--keys", self.keys);
        if !self.validate {
            a.push("--no-validate".into());
        }
        if let Some(r) = self.emulate_meps {
            push_flag(&mut a, "--emulate-meps", r);
        }
        a
    }
}
