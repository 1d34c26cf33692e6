//! `throttle-ctl sweep`: stepped bandwidths x node counts x repeats, stored run by run.
//!
//! The spec (TOML) names the workload and its options, the node counts, ranks per node,
//! bandwidth steps (numbers and ranges such as `40:20:-2`), repeats, a time limit per run,
//! retries, and whether to randomise the order (default yes, seeded, so reruns are
//! reproducible). Every point has a key; a point with a successful row in the store is
//! skipped, so re-running the same spec resumes. A failed run is stored with its reason and
//! retried up to `retries` more times. Ctrl-C kills the running job and stops; everything
//! stored stays.
//!
//! Noise control: before the first run of each node count a warm-up run at 100% is made
//! and not stored (`warmup`); every run is preceded by a settle pause (`settle`, seconds)
//! over which the machine's CPU load is measured and stored with the run, with the bytes
//! the run's nodes moved through their agents. `repeats = "auto"` runs 3 repeats of every
//! point, then more of the points whose median is not yet known within `precision` (the
//! relative half-width of its 90% interval), up to `max_repeats` (twice that at the 100%
//! baseline, which every CTI of its size is measured against).
//!
//! A node that cannot be reached makes the point fail with a reason naming the node, and
//! the sweep goes on (or stops with that message, with [`SweepOptions::fail_fast`]).
//! Every job of a sweep is named with a prefix derived from the results database and the
//! series ([`job_prefix`]), so a sweep that resumes after its controller was killed first
//! removes what that controller left on the agents.
//!
//! * [`spec`]: the file a user writes, parsed and checked key by key; [`steps`]: its
//!   bandwidth steps;
//! * [`plan`]: the checked sweep: its workload, series and points, and the next round of
//!   `repeats = "auto"`;
//! * [`problem`]: the problem axis (`[problem]`): its values, and the option of each
//!   workload a value sets;
//! * [`search`]: the demand search's next steps (`[search]` in the spec);
//! * [`until`]: precision on request, the rounds after the search (`[until]`);
//! * [`execute`]: running it against a cluster and storing every run.

mod execute;
mod plan;
pub mod problem;
pub mod search;
mod spec;
pub mod steps;
pub mod until;

pub use execute::{job_prefix, now_utc, remove_leftovers, Ran, SweepEnd, SweepEvent, SweepOptions};
pub use plan::{Sweep, SweepPoint};
pub use spec::{Repeats, SweepSpec, AUTO_FIRST, KEYS_HELP};
