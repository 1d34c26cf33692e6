//! What the analysis reads: one run ([`observation::Observation`]) and what makes a row
//! no run, the keys of its cells, and runs measured with any tool ([`csv`]).

pub mod cells;
pub mod csv;
pub mod observation;
