//! `analyze --report DIR`: plots as SVG and PNG, and a self-contained `index.html`.
//!
//! Four plots: completion time vs bandwidth per size (medians with their confidence
//! interval as error bars); CTI vs bandwidth per size; the strong-scaling fit with a panel
//! of its residuals; predicted vs measured demand. Bandwidth axes are logarithmic (the
//! steps are dense at low bandwidth, where the curves bend). Legends sit in their own
//! column beside the plot, so they never cover data. The HTML embeds the SVGs inline and
//! gives the tables as HTML tables, so the one file can be mailed or opened anywhere.
//! Fonts come from the system (DejaVu or Liberation, loaded at run time); without one, no
//! plots are drawn and the report says so.
//!
//! * [`plot`]: the plotting kit (fonts, colours, series, a legend beside the plot, log
//!   bandwidth axes);
//! * [`figures`]: the analysis's four plots;
//! * [`html`]: the analysis's page (tables built by `throttle_analysis::render` where they are
//!   shared with the terminal);
//! * [`models`]: the model reports (`model pmm|mw --report`).

mod figures;
mod html;
mod models;
mod plot;

pub use html::write;
pub use models::{write_model, ModelFigure, ModelLine};
