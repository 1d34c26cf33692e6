//! One module per `throttle-ctl` command; each takes parsed arguments and a cluster and
//! returns what to print, so the binary stays a thin parser.

pub mod calibrate;
pub mod demo;
pub mod forward;
pub mod run;
pub mod set;
pub mod status;
