//! LogGPS parameters measured through the agents (`throttle-loggps`): its options and
//! their limits.

use serde::{Deserialize, Serialize};

use super::{push_flag, OptionsError};

/// The largest message size measured, bytes.
pub const MAX_SIZE: usize = 64 << 20;

/// `throttle-loggps`'s options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default)]
pub struct LogGpsOptions {
    /// Message sizes in bytes for the round trip and the overheads (comma-separated; at
    /// least two different ones: the per-byte overheads are slopes over them).
    #[cfg_attr(
        feature = "clap",
        arg(long, default_value = "1,1024,16384,65536", value_delimiter = ',')
    )]
    pub sizes: Vec<usize>,
    /// Repeats per size (1 to 100000).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 50))]
    pub repeats: u32,
    /// Small messages in the train for g (2 to 1000000).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 200))]
    pub train: u32,
    /// How long the stream for G should last, seconds (0.05 to 60).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1.0))]
    pub stream_seconds: f64,
    /// Small messages each rank sends to rank 0 for the master's receive overhead (1 to
    /// 100000).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 20))]
    pub per_peer: u32,
}

impl Default for LogGpsOptions {
    fn default() -> Self {
        LogGpsOptions {
            sizes: vec![1, 1024, 16384, 65536],
            repeats: 50,
            train: 200,
            stream_seconds: 1.0,
            per_peer: 20,
        }
    }
}

impl LogGpsOptions {
    pub fn check(&self) -> Result<(), OptionsError> {
        let mut sizes = self.sizes.clone();
        sizes.sort_unstable();
        sizes.dedup();
        if sizes.len() < 2 || sizes[0] == 0 || sizes[sizes.len() - 1] > MAX_SIZE {
            return Err(OptionsError::new(
                "loggps needs at least two different message sizes, 1 byte to 64 MiB each: the per-byte overheads are slopes over them",
            ));
        }
        if !(1..=100_000).contains(&self.repeats) {
            return Err(OptionsError::new("loggps repeats must be from 1 to 100000"));
        }
        if !(2..=1_000_000).contains(&self.train) {
            return Err(OptionsError::new("loggps train must be from 2 to 1000000"));
        }
        if !(1..=100_000).contains(&self.per_peer) {
            return Err(OptionsError::new(
                "loggps per_peer must be from 1 to 100000",
            ));
        }
        if !(self.stream_seconds.is_finite() && (0.05..=60.0).contains(&self.stream_seconds)) {
            return Err(OptionsError::new(
                "loggps stream_seconds must be from 0.05 to 60",
            ));
        }
        Ok(())
    }

    /// Two nodes at least: traffic within a node is not shaped.
    pub fn check_procs(&self, procs: usize) -> Result<(), OptionsError> {
        super::at_least("loggps", procs, 2)
    }

    pub fn to_args(&self) -> Vec<String> {
        let sizes: Vec<String> = self.sizes.iter().map(|s| s.to_string()).collect();
        let mut a = Vec::new();
        push_flag(&mut a, "--sizes", sizes.join(","));
        push_flag(&mut a, "--repeats", self.repeats);
        push_flag(&mut a, "--train", self.train);
        push_flag(&mut a, "--stream-seconds", self.stream_seconds);
        push_flag(&mut a, "--per-peer", self.per_peer);
        a
    }
}
