//! throttle-ctl: the controller. The binary parses the command line; this library does
//! the work, so it can be tested and reused.
//!
//! * [`commands`]: one module per command, each with its arguments and `exec`.
//! * [`cluster`]: the cluster and how to reach it: the cluster file
//!   ([`cluster::hostlist`]: host lists and hostfiles it is written from;
//!   [`cluster::slurm`]: the addresses Slurm gives a job's nodes);
//!   [`cluster::agent_client`]: the typed client of one agent's control API;
//!   [`cluster::local`] and [`cluster::certs`]: a cluster on this machine;
//!   [`cluster::netns`]: its nodes as network namespaces (namespace hosts);
//!   [`cluster::directory`]: the cluster file's nodes given to every agent.
//! * [`workload`]: a program's options (`throttle_proto::workload`), checked, with a
//!   command's template parsed; [`job`]: one job on the cluster (launch, wait, renew, clean up; or an
//!   [`external`] command such as `mpirun` run on this host), the step
//!   [`sweep`] and the demo are made of; [`load`]: the machine's CPU load and the
//!   agents' byte counters around each run.
//! * [`store`]: the results database; [`measurements`]: from stored runs to the
//!   analysis's input ([`throttle_analysis`], a crate of its own: it computes, this one
//!   does the I/O); [`report`]: plots and the HTML report; [`extrap`]: stored runs as
//!   Extra-P's text input.
//! * [`output`], [`progress`]: what the user sees (tables: [`throttle_analysis::table`]).
//! * [`shared_dir`]: files in directories other users may write (no link followed, new
//!   files exclusive, private directories checked on their descriptor).
//!
//! The values shared with the agents and the workloads are `throttle_proto`'s.

pub mod cluster;
pub mod commands;
pub mod external;
pub mod extrap;
pub mod fidelity;
pub mod intercept;
pub mod job;
pub mod link_lease;
pub mod load;
pub mod measurements;
pub mod output;
pub mod progress;
pub mod report;
pub mod run_status;
pub mod shared_dir;
pub mod store;
pub mod sweep;
pub mod workload;
