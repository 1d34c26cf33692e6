//! What the analysis reads: one run ([`observation::Observation`]) and what makes a row
//! no run, the keys of its cells, runs measured with any tool ([`csv`]) and a series'
//! problem axis ([`problem`]).

pub mod cells;
pub mod csv;
pub mod observation;
pub mod problem;
