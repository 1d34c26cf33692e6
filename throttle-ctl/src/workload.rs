//! The controller's workload: a program's options (`throttle_proto::workload`), checked
//! once when it is made, with a command's template and regexes parsed.
//!
//! Every way into a job (`run`'s flags, a sweep spec's section, `demo`, `model`) ends in
//! [`Workload::new`], so a workload the program would refuse never reaches an agent, and
//! [`Workload::check_procs`] refuses a process count before anything is shaped.

use anyhow::{anyhow, bail, Result};
use throttle_proto::workload::Options;

use crate::external::{CommandTemplate, TimeRegex};
use crate::intercept::Mode;

/// Which program to run and with what options.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    options: Options,
    command: Option<Command>,
}

/// A command of the user's (`--cmd`, `[command]`), run on this host, not by the agents.
#[derive(Clone, Debug, PartialEq)]
pub struct Command {
    pub template: CommandTemplate,
    pub time_regex: Option<TimeRegex>,
    /// Load the preload library into what the command starts through `throttle-ctl
    /// exec` (`Some(Preload)`), or leave the cluster's way.
    pub intercept: Option<Mode>,
}

impl Workload {
    /// Check `options` as the program would, and parse a command's template and regexes.
    pub fn new(options: Options) -> Result<Workload> {
        options.check().map_err(|e| anyhow!("{e}"))?;
        let command = match &options {
            Options::Command(o) => Some(Command {
                template: CommandTemplate::parse(&o.run)?,
                time_regex: match (&o.time_regex, &o.rate_regex) {
                    (Some(t), _) => Some(TimeRegex::parse(t)?),
                    (None, Some(r)) => Some(TimeRegex::parse_rate(r)?),
                    (None, None) => None,
                },
                intercept: o.intercept.as_deref().map(Mode::parse).transpose()?,
            }),
            _ => None,
        };
        Ok(Workload { options, command })
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    pub fn name(&self) -> &'static str {
        self.options.name()
    }

    /// The command this host runs, for a command workload.
    pub fn command(&self) -> Option<&Command> {
        self.command.as_ref()
    }

    /// The program the agents launch and its arguments (none for a command).
    pub fn launch(&self) -> Option<(String, Vec<String>)> {
        self.options.launch()
    }

    /// Refuse a number of processes the program would refuse.
    pub fn check_procs(&self, procs: usize) -> Result<()> {
        self.options.check_procs(procs).map_err(|e| anyhow!("{e}"))
    }

    /// Refuse `nodes` nodes of `ranks_per_node` ranks when they all run on this machine
    /// (a local cluster) and together need more memory than it has available
    /// (`throttle_proto::workload::memory`); each rank checks its own node as it starts
    /// as well, wherever it runs.
    pub fn check_memory_here(&self, nodes: usize, ranks_per_node: usize) -> Result<()> {
        use throttle_proto::workload::memory;
        let procs = nodes * ranks_per_node;
        let (Some(per_node), Some(available)) = (
            memory::per_node(&self.options, procs, ranks_per_node),
            throttle_proto::os::memory::available(),
        ) else {
            return Ok(());
        };
        let need = per_node.saturating_mul(nodes as u64);
        if need > available {
            bail!(
                "{} on {procs} process(es) needs about {} of memory, and its {nodes} node(s) all run on this machine, which has {} available: choose a smaller problem or fewer nodes",
                self.name(),
                memory::gib(need),
                memory::gib(available)
            );
        }
        Ok(())
    }

    /// Whether the ranks sleep instead of computing (each stands for a node with its own
    /// CPU), so that they do not compete for a local cluster's cores.
    pub fn emulates_compute(&self) -> bool {
        self.options.emulates_compute()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_proto::workload::{BfsOptions, CommandOptions, PmmOptions};

    #[test]
    fn emulated_rates_reach_the_programs_command_line() {
        let bfs = Workload::new(Options::Bfs(BfsOptions {
            scale: 12,
            keys: 8,
            validate: false,
            emulate_meps: Some(0.5),
            ..Default::default()
        }))
        .unwrap();
        let (program, args) = bfs.launch().unwrap();
        assert_eq!(program, "throttle-bfs");
        assert!(
            args.windows(2).any(|w| w == ["--emulate-meps", "0.5"]),
            "{args:?}"
        );
        let pmm = Workload::new(Options::Pmm(PmmOptions {
            size: 60,
            emulate_gflops: Some(0.01),
            ..Default::default()
        }))
        .unwrap();
        let (_, args) = pmm.launch().unwrap();
        assert!(
            args.windows(2).any(|w| w == ["--emulate-gflops", "0.01"]),
            "{args:?}"
        );
        assert!(Workload::new(Options::Pmm(PmmOptions {
            emulate_gflops: Some(0.0),
            ..Default::default()
        }))
        .is_err());
    }

    #[test]
    fn a_command_is_parsed_when_the_workload_is_made() {
        let command = |run: &str, time: Option<&str>, intercept: Option<&str>| {
            Workload::new(Options::Command(CommandOptions {
                run: run.into(),
                time_regex: time.map(String::from),
                rate_regex: None,
                intercept: intercept.map(String::from),
            }))
        };
        let w = command(
            "mpirun -np {procs} ./a",
            Some("t=([0-9.]+)"),
            Some("preload"),
        )
        .unwrap();
        assert!(w.launch().is_none());
        assert_eq!(w.command().unwrap().intercept, Some(Mode::Preload));
        assert!(
            command("echo {proc}", None, None).is_err(),
            "typo placeholder"
        );
        assert!(command("echo", Some("no group"), None).is_err());
        assert!(command("echo", None, Some("ebpf")).is_err());
    }
}
