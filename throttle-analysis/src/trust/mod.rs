//! How far each figure can be trusted:
//!
//! * [`bootstrap`]: intervals of every derived number, resampling runs.
//! * [`backtest`]: each measured size projected from the smaller ones by both models, and
//!   the verdicts.
//! * [`cpu`]: the sizes whose runs kept the machine's cores busy (CPU-bound), and the
//!   verdicts they downgrade.
//! * [`model_error`]: how far a measurement at the target may be from each model's
//!   projection beyond its noise: the reading, the lack of fit, the growth per doubling
//!   (its backtest pooled with a prior learned across programs).
//! * [`latency_check`]: the interval and backtest of a projected latency tolerance.
//! * [`surface_check`]: the backtest and intervals of a projection in two parameters
//!   (size and problem).
//! * [`warnings`]: what the analysis says about its own data.

pub mod backtest;
pub mod bootstrap;
pub mod cpu;
pub mod latency_check;
pub mod model_error;
pub mod surface_check;
pub mod warnings;
