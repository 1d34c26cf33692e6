//! What a workload is: one typed options struct per program, defined once for both sides
//! of the process boundary.
//!
//! The rank binaries (`throttle-bfs`, `throttle-pmm`, `throttle-mw`, `throttle-loggps`)
//! parse their command lines into these structs (their flags are derived from them with
//! the `clap` feature); the controller builds the same structs from `run`'s flags or a
//! sweep spec's section, checks them ([`Options::check`], [`Options::check_procs`]) before
//! anything is launched, turns them into the program's arguments ([`Options::launch`]),
//! and stores them as JSON ([`Options::to_json`]) that it reads back as types
//! ([`Options::from_json`]).
//!
//! Invariant: `from_args(to_args(o)) == o` for every options struct (tested), so what
//! the controller asks for is what the program runs. A field added later is serialized
//! only when it differs from its default, so the stores and series names written before
//! it stay the same.

pub mod bfs;
pub mod loggps;
pub mod memory;
pub mod mw;
pub mod pmm;
pub mod program;

use std::fmt::Display;

pub use bfs::BfsOptions;
pub use loggps::LogGpsOptions;
pub use mw::{MwOptions, MwWork};
pub use pmm::{Bcast, PmmOptions};
pub use program::{CommandOptions, ProgramOptions};

/// Options a program would refuse, said as the program's user would want to read it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OptionsError(pub(crate) String);

impl OptionsError {
    pub(crate) fn new(why: &str) -> OptionsError {
        OptionsError(why.to_string())
    }
}

/// A workload and its options.
#[derive(Clone, Debug, PartialEq)]
pub enum Options {
    Bfs(BfsOptions),
    Pmm(PmmOptions),
    Mw(MwOptions),
    LogGps(LogGpsOptions),
    /// Any program the agents allow, launched by them on every node.
    Program(ProgramOptions),
    /// A command of the user's run on the controller's host, not by the agents.
    Command(CommandOptions),
}

impl Options {
    /// The workload names, as `run --workload`, a sweep spec's `workload` and the store
    /// say them.
    pub const NAMES: [&'static str; 6] = ["bfs", "pmm", "mw", "loggps", "program", "command"];

    pub fn name(&self) -> &'static str {
        match self {
            Options::Bfs(_) => "bfs",
            Options::Pmm(_) => "pmm",
            Options::Mw(_) => "mw",
            Options::LogGps(_) => "loggps",
            Options::Program(_) => "program",
            Options::Command(_) => "command",
        }
    }

    /// Refuse what the program would refuse, whatever the number of processes.
    pub fn check(&self) -> Result<(), OptionsError> {
        match self {
            Options::Bfs(o) => o.check(),
            Options::Pmm(o) => o.check(),
            Options::Mw(o) => o.check(),
            Options::LogGps(o) => o.check(),
            Options::Program(o) => o.check(),
            Options::Command(o) => o.check(),
        }
    }

    /// Refuse a number of processes the program would refuse (with these options).
    pub fn check_procs(&self, procs: usize) -> Result<(), OptionsError> {
        match self {
            Options::Bfs(o) => o.check_procs(procs),
            Options::Pmm(o) => o.check_procs(procs),
            Options::Mw(o) => o.check_procs(procs),
            Options::LogGps(o) => o.check_procs(procs),
            Options::Program(_) | Options::Command(_) => at_least(self.name(), procs, 1),
        }
    }

    /// The program the agents launch on every node and its arguments (none for a
    /// command, which the controller runs itself).
    pub fn launch(&self) -> Option<(String, Vec<String>)> {
        Some(match self {
            Options::Bfs(o) => ("throttle-bfs".into(), o.to_args()),
            Options::Pmm(o) => ("throttle-pmm".into(), o.to_args()),
            Options::Mw(o) => ("throttle-mw".into(), o.to_args()),
            Options::LogGps(o) => ("throttle-loggps".into(), o.to_args()),
            Options::Program(o) => (o.name.clone(), o.args.clone()),
            Options::Command(_) => return None,
        })
    }

    /// Whether the ranks sleep instead of computing (each stands for a node with its own
    /// CPU), so that they do not compete for a local cluster's cores.
    pub fn emulates_compute(&self) -> bool {
        match self {
            Options::Bfs(o) => o.emulate_meps.is_some(),
            Options::Pmm(o) => o.emulate_gflops.is_some(),
            Options::Mw(o) => o.work == MwWork::Sleep,
            _ => false,
        }
    }

    /// The options as stored with every run (the struct's JSON, without the name).
    pub fn to_json(&self) -> serde_json::Value {
        let v = match self {
            Options::Bfs(o) => serde_json::to_value(o),
            Options::Pmm(o) => serde_json::to_value(o),
            Options::Mw(o) => serde_json::to_value(o),
            Options::LogGps(o) => serde_json::to_value(o),
            Options::Program(o) => serde_json::to_value(o),
            Options::Command(o) => serde_json::to_value(o),
        };
        // Plain structs of numbers, strings and enums: serializing cannot fail.
        v.unwrap_or_default()
    }

    /// Read stored options back: `name` is the workload, `json` what [`Options::to_json`]
    /// wrote, checked like new options (a store is a file someone handed us: anything
    /// else is an error, never a guess).
    pub fn from_json(name: &str, json: &str) -> Result<Options, OptionsError> {
        fn parse<'a, T: serde::Deserialize<'a>>(
            name: &str,
            json: &'a str,
        ) -> Result<T, OptionsError> {
            serde_json::from_str(json)
                .map_err(|e| OptionsError(format!("the stored {name} options are not valid: {e}")))
        }
        let options = match name {
            "bfs" => Options::Bfs(parse(name, json)?),
            "pmm" => Options::Pmm(parse(name, json)?),
            "mw" => Options::Mw(parse(name, json)?),
            "loggps" => Options::LogGps(parse(name, json)?),
            "program" => Options::Program(parse(name, json)?),
            "command" => Options::Command(parse(name, json)?),
            other => return Err(OptionsError(unknown(other))),
        };
        options.check()?;
        Ok(options)
    }
}

/// The error for a workload name that is none of [`Options::NAMES`].
pub fn unknown(name: &str) -> String {
    format!(
        "unknown workload `{}`: use {}",
        name.escape_debug(),
        Options::NAMES.join(", ")
    )
}

/// Parse a program's arguments (without the program's name) into its options, as the
/// rank binary does.
#[cfg(feature = "clap")]
pub fn from_args<T: clap::Args>(program: &'static str, args: &[String]) -> Result<T, clap::Error> {
    use clap::{FromArgMatches, Parser};

    #[derive(Parser)]
    struct Whole<T: clap::Args> {
        #[command(flatten)]
        options: T,
    }
    let matches = <Whole<T> as clap::CommandFactory>::command()
        .name(program)
        .try_get_matches_from(std::iter::once(program.to_string()).chain(args.iter().cloned()))?;
    Whole::<T>::from_arg_matches(&matches).map(|w| w.options)
}

pub(crate) fn push_flag(args: &mut Vec<String>, flag: &str, value: impl Display) {
    args.push(flag.to_string());
    args.push(value.to_string());
}

pub(crate) fn at_least(what: &str, procs: usize, min: usize) -> Result<(), OptionsError> {
    if procs < min {
        return Err(OptionsError(format!(
            "{what} needs at least {min} processes, not {procs}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored_round_trip(o: Options) {
        let json = o.to_json().to_string();
        assert_eq!(Options::from_json(o.name(), &json), Ok(o), "{json}");
    }

    #[test]
    fn stored_options_read_back_as_the_same_types() {
        stored_round_trip(Options::Bfs(BfsOptions {
            seed: 7,
            emulate_meps: Some(0.5),
            ..Default::default()
        }));
        stored_round_trip(Options::Pmm(PmmOptions {
            size: 600,
            bcast: Bcast::Pipelined,
            emulate_gflops: Some(0.05),
        }));
        stored_round_trip(Options::Mw(MwOptions::default()));
        stored_round_trip(Options::LogGps(LogGpsOptions::default()));
        stored_round_trip(Options::Program(ProgramOptions {
            name: "my-app".into(),
            args: vec!["--n".into(), "3".into()],
        }));
        stored_round_trip(Options::Command(CommandOptions {
            run: "mpirun -np {procs} ./app".into(),
            time_regex: Some("t=([0-9.]+)".into()),
            rate_regex: None,
            intercept: Some("preload".into()),
        }));
    }

    #[test]
    fn stores_written_before_a_field_existed_keep_their_options_text() {
        // What a PMM sweep stored before the options had a type (sweep.rs's json!):
        // series names and resumed sweeps depend on the same text.
        let pmm = Options::Pmm(PmmOptions {
            size: 512,
            bcast: Bcast::Binomial,
            emulate_gflops: None,
        });
        assert_eq!(
            pmm.to_json().to_string(),
            r#"{"bcast":"binomial","size":512}"#
        );
        let bfs = Options::Bfs(BfsOptions {
            validate: false,
            ..Default::default()
        });
        assert_eq!(
            bfs.to_json().to_string(),
            r#"{"edge_factor":16,"keys":64,"scale":16,"validate":false}"#
        );
        let old_mw = r#"{"volume":16000000,"alpha":0.5,"compute_seconds":2.0,"iterations":3,"work":"sleep"}"#;
        assert_eq!(
            Options::from_json("mw", old_mw),
            Ok(Options::Mw(MwOptions::default()))
        );
    }

    #[test]
    fn hostile_stored_options_are_errors() {
        for (name, json) in [
            ("pmm", r#"{"size":"big"}"#),
            ("pmm", r#"{"size":4,"extra":1}"#),
            ("pmm", "not json"),
            ("bfs", "42"),
            ("bfs", r#"{"scale":0}"#),
            ("pmm", r#"{"size":0}"#),
            ("rm -rf", "{}"),
            ("program", "{}"),
        ] {
            let e = Options::from_json(name, json).unwrap_err();
            assert!(!e.to_string().is_empty(), "{name} {json}");
        }
        assert!(Options::from_json("\u{1b}[2J", "{}")
            .unwrap_err()
            .to_string()
            .contains("\\u{1b}"));
    }

    #[test]
    fn pmm_needs_a_square_grid_that_divides_the_matrix() {
        let o = Options::Pmm(PmmOptions {
            size: 600,
            ..Default::default()
        });
        for ok in [1, 4, 9, 25] {
            assert_eq!(o.check_procs(ok), Ok(()), "{ok}");
        }
        let e = o.check_procs(3).unwrap_err().to_string();
        assert!(e.contains("square") && e.contains('3'), "{e}");
        let e = o.check_procs(49).unwrap_err().to_string();
        assert!(e.contains("not a multiple of 7"), "{e}");
        assert!(o.check_procs(0).is_err());
    }

    #[test]
    fn options_the_programs_would_refuse_are_refused_here() {
        let bad = [
            Options::Pmm(PmmOptions {
                emulate_gflops: Some(0.0),
                ..Default::default()
            }),
            Options::Pmm(PmmOptions {
                size: 0,
                ..Default::default()
            }),
            Options::Bfs(BfsOptions {
                scale: 31,
                ..Default::default()
            }),
            Options::Bfs(BfsOptions {
                emulate_meps: Some(f64::NAN),
                ..Default::default()
            }),
            Options::Mw(MwOptions {
                alpha: 1.5,
                ..Default::default()
            }),
            Options::LogGps(LogGpsOptions {
                sizes: vec![8, 8],
                ..Default::default()
            }),
            Options::LogGps(LogGpsOptions {
                stream_seconds: 0.0,
                ..Default::default()
            }),
            Options::Command(CommandOptions {
                run: "x".into(),
                time_regex: Some("a".into()),
                rate_regex: Some("b".into()),
                intercept: None,
            }),
            Options::Program(ProgramOptions {
                name: " ".into(),
                args: vec![],
            }),
        ];
        for o in bad {
            assert!(o.check().is_err(), "{o:?}");
        }
        assert!(Options::LogGps(LogGpsOptions::default())
            .check_procs(1)
            .is_err());
    }

    /// What the controller asks for is what the program parses: every options struct
    /// survives its own arguments, defaults and non-defaults alike.
    #[cfg(feature = "clap")]
    #[test]
    fn every_program_parses_the_arguments_the_controller_builds_into_the_same_options() {
        fn round_trip<T: clap::Args + PartialEq + std::fmt::Debug>(
            o: T,
            to_args: impl Fn(&T) -> Vec<String>,
        ) {
            let args = to_args(&o);
            assert_eq!(from_args::<T>("prog", &args).unwrap(), o, "{args:?}");
        }
        round_trip(BfsOptions::default(), BfsOptions::to_args);
        round_trip(
            BfsOptions {
                scale: 12,
                edge_factor: 8,
                seed: 9,
                keys: 3,
                validate: false,
                emulate_meps: Some(2.5),
            },
            BfsOptions::to_args,
        );
        round_trip(PmmOptions::default(), PmmOptions::to_args);
        for bcast in Bcast::ALL {
            round_trip(
                PmmOptions {
                    size: 96,
                    bcast,
                    emulate_gflops: Some(0.0117),
                },
                PmmOptions::to_args,
            );
        }
        round_trip(MwOptions::default(), MwOptions::to_args);
        round_trip(
            MwOptions {
                volume: 1,
                alpha: 0.125,
                compute_seconds: 0.1,
                iterations: 7,
                work: MwWork::Spin,
            },
            MwOptions::to_args,
        );
        round_trip(LogGpsOptions::default(), LogGpsOptions::to_args);
        round_trip(
            LogGpsOptions {
                sizes: vec![8, 4096],
                repeats: 3,
                train: 5,
                stream_seconds: 0.25,
                per_peer: 2,
            },
            LogGpsOptions::to_args,
        );
        // And the defaults the programs apply are the types' defaults.
        assert_eq!(
            from_args::<BfsOptions>("p", &[]).unwrap(),
            BfsOptions::default()
        );
        assert_eq!(
            from_args::<PmmOptions>("p", &[]).unwrap(),
            PmmOptions::default()
        );
        assert_eq!(
            from_args::<MwOptions>("p", &[]).unwrap(),
            MwOptions::default()
        );
        assert_eq!(
            from_args::<LogGpsOptions>("p", &[]).unwrap(),
            LogGpsOptions::default()
        );
    }
}
