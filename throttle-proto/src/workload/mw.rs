//! A master and P - 1 workers (`throttle-mw`): its options and their limits.

use serde::{Deserialize, Serialize};

use super::{push_flag, OptionsError};

/// How a master/worker program's workers spend their compute time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum MwWork {
    /// Sleep: each worker stands for a node with its own CPU.
    #[default]
    Sleep,
    /// Burn this host's CPU for the same time.
    Spin,
}

impl MwWork {
    pub fn as_str(self) -> &'static str {
        match self {
            MwWork::Sleep => "sleep",
            MwWork::Spin => "spin",
        }
    }
}

impl std::fmt::Display for MwWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for MwWork {
    type Err = String;
    fn from_str(s: &str) -> Result<MwWork, String> {
        match s {
            "sleep" => Ok(MwWork::Sleep),
            "spin" => Ok(MwWork::Spin),
            _ => Err(format!("work `{s}` is not sleep or spin")),
        }
    }
}

/// `throttle-mw`'s options: per iteration, the master sends alpha V bytes of tasks, the
/// workers compute Tc seconds in all and return (1 - alpha) V bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default)]
pub struct MwOptions {
    /// V: bytes per iteration, tasks and results together.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 16_000_000))]
    pub volume: u64,
    /// alpha: the share of the volume the master sends (0 to 1); the rest returns as
    /// results.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.5))]
    pub alpha: f64,
    /// Tc: seconds of computation per iteration, shared by the workers.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 2.0))]
    pub compute_seconds: f64,
    /// Timed iterations, after one warm-up (the median is the run's time).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 3))]
    pub iterations: u32,
    /// How a worker computes: sleep (a node with its own CPU) or spin (burn this CPU).
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = MwWork::Sleep))]
    pub work: MwWork,
}

impl Default for MwOptions {
    fn default() -> Self {
        MwOptions {
            volume: 16_000_000,
            alpha: 0.5,
            compute_seconds: 2.0,
            iterations: 3,
            work: MwWork::Sleep,
        }
    }
}

impl MwOptions {
    pub fn check(&self) -> Result<(), OptionsError> {
        if !(self.alpha.is_finite() && (0.0..=1.0).contains(&self.alpha)) {
            return Err(OptionsError(format!(
                "mw alpha must be between 0 and 1, not {}",
                self.alpha
            )));
        }
        if !(self.compute_seconds.is_finite() && (0.0..=3600.0).contains(&self.compute_seconds)) {
            return Err(OptionsError::new(
                "mw compute_seconds must be between 0 and 3600",
            ));
        }
        if self.volume > 1 << 34 {
            return Err(OptionsError::new(
                "mw volume must be at most 16 GiB per iteration",
            ));
        }
        if !(1..=100_000).contains(&self.iterations) {
            return Err(OptionsError::new(
                "mw iterations must be between 1 and 100000",
            ));
        }
        Ok(())
    }

    /// One process computes alone; more are a master and workers.
    pub fn check_procs(&self, procs: usize) -> Result<(), OptionsError> {
        super::at_least("mw", procs, 1)
    }

    pub fn to_args(&self) -> Vec<String> {
        let mut a = Vec::new();
        push_flag(&mut a, "--volume", self.volume);
        push_flag(&mut a, "--alpha", self.alpha);
        push_flag(&mut a, "--compute-seconds", self.compute_seconds);
        push_flag(&mut a, "--iterations", self.iterations);
        push_flag(&mut a, "--work", self.work);
        a
    }
}
