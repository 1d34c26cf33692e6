//! The analysis of throttle: from runs (a completion time per size and bandwidth) to the
//! bandwidth a program needs, its projection to larger clusters and how far to trust it,
//! and the analytic models of the seed papers checked against what was measured.
//!
//! This crate is pure: observations and the question come in, the answer with its
//! figures goes out, as data and as text. It starts no process, opens no socket or file,
//! reads no clock and knows no cluster or store: the controller (`throttle-ctl`) reads
//! the store or a CSV file into [`Observation`]s, calls [`analyze()`], and prints, exports
//! or plots the [`Analysis`]. What the controller measured about a run's conditions (the
//! CPUs' busy share, its links' proof) comes in as fields of the observation.
//!
//! Its floors, each using only the ones above it in this list:
//!
//! * [`table`]: text for people: tables built once and shown as terminal columns, HTML
//!   or Markdown; numbers with the digits they need; text from a file made safe to print.
//! * [`data`]: one run as the analysis sees it ([`Observation`]), what makes a row no
//!   run, the cells' keys, and runs measured with any tool (CSV).
//! * [`method`]: the method's formulas (docs/method.md): statistics and quantiles, the
//!   strong-scaling regression, CTI and demand, the chain of them, the noise floor, the
//!   traffic model and the model search it is chosen by.
//! * [`trust`]: how far each figure can be trusted: the bootstrap, the backtest, the
//!   model error, the warnings.
//! * [`answer`]: what `analyze` answers ([`Analysis`]): every figure with the intervals
//!   it is stated with, and what would narrow them.
//! * [`render`](mod@render): the answer in words: its bottom line, the tables a person
//!   reads, Markdown and CSV, the glossary of the terms printed.
//! * [`analyze`](mod@analyze): the pipeline from observations to the answer.
//! * [`models`]: the analytic models of the other seed papers (LogGPS, master/worker,
//!   parallel matrix multiplication) against stored runs.

pub mod analyze;
pub mod answer;
pub mod data;
pub mod method;
pub mod models;
pub mod render;
pub mod table;
pub mod trust;

pub use analyze::{analyze, choose_series, runs_of, Question, Selection};
pub use answer::{
    Analysis, DcPair, Demand, MedianPoint, Projection, Saturation, TimeUnit, TrafficAnswer,
};
pub use data::observation::Observation;
pub use render::render;
