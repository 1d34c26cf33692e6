//! Calibration: what a link really carries (`POST /calibrate`).

use serde::{Deserialize, Serialize};

use crate::name::Name;

/// The body of `POST /calibrate`: send to `to` for `seconds` (0.1 to 60; default 3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrateRequest {
    pub to: Name,
    #[serde(default = "default_seconds")]
    pub seconds: f64,
}

fn default_seconds() -> f64 {
    3.0
}

/// Result of a calibration run from one node to another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub from: Name,
    pub to: Name,
    /// Configured rate during the run (bytes/s); `None` if unlimited.
    pub target_bytes_per_sec: Option<f64>,
    pub bytes: u64,
    pub seconds: f64,
    pub achieved_bytes_per_sec: f64,
}
