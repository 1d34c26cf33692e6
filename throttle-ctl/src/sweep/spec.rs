//! The sweep spec: the TOML file a user writes (the workload and its one section, node
//! counts, bandwidth steps and ranges, repeats, noise control), parsed and checked key by
//! key. Each key is documented on its field.

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use throttle_proto::workload::{
    BfsOptions, CommandOptions, MwOptions, Options, PmmOptions, ProgramOptions,
};

use super::problem::Problem;
use super::search::Search;
use super::steps::Steps;
use super::until::Until;
use throttle_proto::TimeLimit;

/// Every key of a spec, for `sweep --help` (a test checks that none is missing); a macro
/// so that clap's help can `concat!` it.
#[macro_export]
macro_rules! sweep_keys_help {
    () => {
        r#"The spec is a TOML file. Its keys (defaults in brackets):
  workload = "pmm"          bfs, pmm, mw, program or command; its options go in the
                            table of the same name ([pmm] ...; `throttle-ctl run --help`
                            lists them), a table for another workload is an error
  name = "imb-allreduce"    the series' name in the store and the analysis [the
                            workload and its options, e.g. a command's whole line];
                            the same name resumes, another starts a new series
  nodes = [4, 9, 16]        node counts; each must suit the workload (pmm: squares)
  ranks_per_node = 1        [1]
  bandwidths = [100, 50, "40:20:-5", "unlimited"]
                            steps in percent of the link (100, "30%"; "unlimited"
                            or "off": no shaping), START:STOP:STEP ranges
                            (inclusive); every CTI is measured against 100 (a
                            sweep without it is warned about; with [search],
                            refused)
  latencies = [0, 50, 200, 1000]
                            latency demand: also run each node count on the full
                            link with its added one-way latency set to each, us
                            (0, the baseline, is required and gets twice the
                            repeats; the other points run at 0);
                            `analyze` reads the largest latency within each CTI
                            level and projects it to larger sizes []
  repeats = 3               runs per point [3] (with [search], twice as many at
                            100%), or "auto": 3, then more where the median is
                            not yet within `precision`
  precision = 0.02          with "auto": the 90% interval of a point's median
                            within +-2% [0.02]
  max_repeats = 10          with "auto": at most this many runs of a point (twice
                            as many at 100%) [10]
  warmup = true             one unstored run at 100% per node count first [true]
  settle = 1.0              seconds of pause before each run; the machine's load is
                            measured over it [1.0]
  time_limit = 600          seconds before a run is killed [600]
  randomize = true          run the points in a seeded random order [true]
  seed = 0                  [0]
  retries = 2               more attempts for a failed or flagged point [2]
  [search]                  demand search: after the steps above, more steps per
                            node count where each CTI level is crossed
    levels = [10, 15, 20, 25]   CTI levels, percent [10, 15, 20, 25]
    width = 3               done when each level lies between two measured steps
                            at most this many points apart [3]
    max_steps = 10          most steps beyond `bandwidths` per node count; steps
                            stored by earlier sweeps of the series count [10]
    top = 99                highest step it places, percent [99]
  [until]                   precision on request: after the sweep and the search,
                            keep measuring until the answer at `procs` is narrow
    procs = 16              the size (processes) the answer is for
    width = 25              done when every level's interval there is at most this
                            many points of bandwidth wide [25]
    budget = 100            most runs it may add [100]
    sizes = [8]             node counts it may add (the next size you can afford)
                            when a larger measured size narrows the answer most []
    held_out = [8]          sizes (processes) measured but left out of the fits []
    levels = [10, 20]       CTI levels [the [search] levels, or 10, 15, 20, 25]
  [problem]                 the problem's size as a second parameter, one of:
    values = [11, 12, 13]   every node count at every value (crossed)
    per_proc = 4000000      weak scaling: the value is per_proc x processes
    pairs = [[2, 11], [4, 12]]  (node count, value) pairs: a table of both
                            The value sets bfs's scale, pmm's size, mw's volume
                            (its work grows alike: compute_seconds is the work
                            of the [mw] volume), a command's n placeholder (the
                            letter n in curly braces in its run line). One series,
                            every run stored with its value; `analyze` fits the
                            demand in both and projects to --predict P --problem N
  [command]                 with workload = "command": your own program
    run = "mpirun ..."      its command line (/bin/sh -c), with {nodes}, {procs},
                            {ranks_per_node}, {hostfile} (one node per line, its
                            slots), {bw} (the step, percent) and, with a
                            [problem], n in curly braces (the problem value);
                            an mpirun needs
                            `throttle-ctl exec` as its launch agent (every rank
                            runs as its node): --mca plm_rsh_agent "throttle-ctl exec"
    time_regex = 'elapsed: ([0-9.]+)'   its one group: the completion time, s
                            [none: the job's wall time]
    rate_regex = 'TEPS:[ !]+([0-9.e+-]+)'   or a rate it prints (larger is
                            faster; analysed as 1/rate, shown as the rate)
    intercept = "preload"   carry its connections by the preload library [the
                            cluster's way]

Example (more in experiments/*.toml):
  workload = "pmm"
  nodes = [4, 9, 16]
  bandwidths = [100, 50, 20]
  [pmm]
  size = 300
  emulate_gflops = 0.0117
  [search]
  levels = [10, 20]
"#
    };
}

/// Every key of a spec ([`sweep_keys_help`]).
pub const KEYS_HELP: &str = sweep_keys_help!();

/// The sweep specification file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// bfs, pmm, mw, program, or command (a command of the user's run on this host).
    pub workload: String,
    /// The series' name (the store's key for its runs) instead of the workload and its
    /// options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub nodes: Vec<usize>,
    #[serde(default = "one")]
    pub ranks_per_node: usize,
    /// Steps: percentages (`100`, `"30%"`), `"unlimited"` (`"off"`), or ranges
    /// `"start:stop:step"` (inclusive).
    pub bandwidths: Steps,
    /// Added one-way latencies (us) to run each node count at, on the full link: the
    /// latency demand (0 is the baseline).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latencies: Vec<u64>,
    /// A number, or "auto" (see the module documentation).
    #[serde(default)]
    pub repeats: Repeats,
    /// With `repeats = "auto"`: the most repeats of a throttled point (the 100% baseline
    /// gets twice as many).
    #[serde(default = "ten")]
    pub max_repeats: u32,
    /// With `repeats = "auto"`: repeat until the 90% interval of the point's median is
    /// within this share of it (0.02: +-2%).
    #[serde(default = "two_percent")]
    pub precision: f64,
    /// One unstored run at 100% before the first run of each node count.
    #[serde(default = "yes")]
    pub warmup: bool,
    /// Seconds of pause before each run (the machine's load is measured over it).
    #[serde(default = "one_second")]
    pub settle: f64,
    /// Seconds per run before it is killed.
    #[serde(default)]
    pub time_limit: TimeLimit,
    #[serde(default = "yes")]
    pub randomize: bool,
    #[serde(default = "two")]
    pub retries: u32,
    #[serde(default)]
    pub seed: u64,
    /// Demand search: more steps per node count where each CTI level is crossed, after
    /// the steps in `bandwidths` (see [`super::search`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<Search>,
    /// Precision on request: measure until the answer at a size is narrow enough (see
    /// [`super::until`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Until>,
    /// The problem's size as a second parameter (see [`super::problem`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
    /// The workload's section: the one `workload` names, no other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfs: Option<BfsOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmm: Option<PmmOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mw: Option<MwOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<ProgramOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandOptions>,
}

impl SweepSpec {
    /// A spec of `workload` over `nodes` and `bandwidths` (steps as in the file), every
    /// other key at its default.
    pub fn new(workload: Options, nodes: Vec<usize>, bandwidths: Steps) -> SweepSpec {
        let mut spec = SweepSpec {
            workload: workload.name().to_string(),
            name: None,
            nodes,
            ranks_per_node: one(),
            bandwidths,
            latencies: Vec::new(),
            repeats: Repeats::default(),
            max_repeats: ten(),
            precision: two_percent(),
            warmup: yes(),
            settle: one_second(),
            time_limit: TimeLimit::DEFAULT,
            randomize: yes(),
            retries: two(),
            seed: 0,
            search: None,
            until: None,
            problem: None,
            bfs: None,
            pmm: None,
            mw: None,
            program: None,
            command: None,
        };
        spec.set_options(workload);
        spec
    }

    /// Put `workload`'s options in their section (the workload is the same).
    pub fn set_options(&mut self, workload: Options) {
        match workload {
            Options::Bfs(o) => self.bfs = Some(o),
            Options::Pmm(o) => self.pmm = Some(o),
            Options::Mw(o) => self.mw = Some(o),
            Options::Program(o) => self.program = Some(o),
            Options::Command(o) => self.command = Some(o),
            // Not swept: [`SweepSpec::options`] says so.
            Options::LogGps(_) => {}
        }
    }

    /// The options of the workload `workload` names: its section, or its defaults where
    /// it has some. A section for another workload is an error (it would be ignored).
    pub fn options(&self) -> Result<Options> {
        let sections = [
            ("bfs", self.bfs.is_some()),
            ("pmm", self.pmm.is_some()),
            ("mw", self.mw.is_some()),
            ("program", self.program.is_some()),
            ("command", self.command.is_some()),
        ];
        if let Some((other, _)) = sections
            .iter()
            .find(|(name, present)| *present && *name != self.workload)
        {
            bail!(
                "the spec has a [{other}] section but `workload = \"{}\"`: remove it, or set `workload = \"{other}\"`",
                self.workload.escape_debug()
            );
        }
        Ok(match self.workload.as_str() {
            "bfs" => Options::Bfs(self.bfs.clone().unwrap_or_else(|| BfsOptions {
                // A sweep measures; `run` checks the program.
                validate: false,
                ..BfsOptions::default()
            })),
            "pmm" => Options::Pmm(self.pmm.clone().unwrap_or_default()),
            "mw" => Options::Mw(self.mw.clone().unwrap_or_default()),
            "program" => Options::Program(self.program.clone().ok_or_else(|| {
                anyhow!("workload = \"program\" needs a [program] table with name")
            })?),
            "command" => Options::Command(self.command.clone().ok_or_else(|| {
                anyhow!("workload = \"command\" needs a [command] table with run = \"...\"")
            })?),
            "loggps" => bail!("loggps is not swept: `throttle-ctl model loggps` measures it"),
            other => bail!("{}", throttle_proto::workload::unknown(other)),
        })
    }
}

fn one() -> usize {
    1
}
fn two() -> u32 {
    2
}
fn ten() -> u32 {
    10
}
fn two_percent() -> f64 {
    0.02
}
fn one_second() -> f64 {
    1.0
}

/// How many runs per point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repeats {
    Fixed(u32),
    /// [`AUTO_FIRST`] each, then more where the median is not yet precise.
    Auto,
}

/// Repeats every point gets first under `repeats = "auto"`.
pub const AUTO_FIRST: u32 = 3;

impl Default for Repeats {
    fn default() -> Self {
        Repeats::Fixed(3)
    }
}

impl Repeats {
    /// The repeats planned up front.
    pub fn first(self) -> u32 {
        match self {
            Repeats::Fixed(n) => n,
            Repeats::Auto => AUTO_FIRST,
        }
    }
}

impl Serialize for Repeats {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Repeats::Fixed(n) => s.serialize_u32(*n),
            Repeats::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for Repeats {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match toml::Value::deserialize(d)? {
            toml::Value::Integer(n) if (1..=10_000).contains(&n) => Ok(Repeats::Fixed(n as u32)),
            toml::Value::String(s) if s == "auto" => Ok(Repeats::Auto),
            other => Err(serde::de::Error::custom(format!(
                "`repeats` must be a number from 1 to 10000 or \"auto\", not {other}"
            ))),
        }
    }
}

fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_in_the_help() {
        let mut spec = SweepSpec::new(
            Options::Pmm(PmmOptions::default()),
            vec![4],
            Steps::parse_list("100").unwrap(),
        );
        spec.search = Some(Search::default());
        spec.until = Some(super::super::until::Until {
            procs: 16,
            width: 25.0,
            budget: 100,
            sizes: vec![8],
            held_out: vec![4],
            levels: Some(vec![10.0]),
        });
        spec.name = Some("a name".into());
        spec.latencies = vec![0, 50];
        spec.problem = Some(Problem {
            values: vec![1],
            per_proc: Some(1),
            pairs: vec![(4, 1)],
        });
        let text = toml::to_string(&spec).unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap();
        for (key, value) in &table {
            if key == "pmm" {
                continue;
            }
            assert!(
                KEYS_HELP.contains(&format!("{key} = ")) || KEYS_HELP.contains(&format!("[{key}]")),
                "{key} is not in KEYS_HELP"
            );
            if let toml::Value::Table(inner) = value {
                for k in inner.keys() {
                    assert!(
                        KEYS_HELP.contains(&format!("{k} = ")),
                        "{key}.{k} is not in KEYS_HELP"
                    );
                }
            }
        }
        // The example in the help is a valid spec.
        let example = KEYS_HELP.split_once("*.toml):\n").unwrap().1;
        let example: String = example.lines().map(|l| format!("{}\n", l.trim())).collect();
        let spec: SweepSpec = toml::from_str(&example).unwrap();
        assert!(super::super::Sweep::new(spec).is_ok(), "{example}");
    }
}
