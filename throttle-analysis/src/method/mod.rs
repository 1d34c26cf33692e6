//! The method's formulas (docs/method.md), each in one place:
//!
//! * [`stats`]: medians and their intervals, CV, pool-adjacent-violators, a seeded RNG.
//! * [`quantiles`]: the normal and Student's t quantiles every interval is made from (the
//!   one home of the z-values).
//! * [`regression`]: T(p) = C0 + C1/p + C2/sqrt(p), with leave-one-out and
//!   leave-one-size-out errors.
//! * [`demand`]: the paper's formulas: CTI, demand with censoring, DC, projection,
//!   saturation.
//! * [`noise`]: the smallest CTI each size's repeats can resolve, and the precision of a
//!   median (the one home of the noise floor's formula).
//! * [`normal_form`]: the model search the traffic model's parts are chosen by.
//! * [`traffic`]: a projection from the bytes the agents counted, beside DC's.
//! * [`surface`]: the model search in two parameters, size and problem.
//! * [`problem_traffic`]: the traffic model's parts in both, and its demand at any (P, N).
//! * [`latency`]: latency demand: the largest added latency within each level, its
//!   model T(L) = T(0) + m L and its projection.
//! * [`chain`]: those formulas chained from cell medians to every derived number.

pub mod chain;
pub mod demand;
pub mod latency;
pub mod noise;
pub mod normal_form;
pub mod problem_traffic;
pub mod quantiles;
pub mod regression;
pub mod stats;
pub mod surface;
pub mod traffic;
