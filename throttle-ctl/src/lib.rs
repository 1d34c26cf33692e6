//! throttle-ctl: the controller. The binary parses the command line; this library does
//! the work, so it can be tested and reused.
//!
//! * [`commands`]: one module per command, each with its arguments and `exec`.
//! * [`cluster`]: the cluster file ([`hostlist`]: host lists and hostfiles it is written
//!   from; [`slurm`]: the addresses Slurm gives a job's nodes); [`agent_client`]: the typed client of one agent's
//!   control API; [`local_cluster`] and [`certs`]: a cluster on this machine;
//!   [`netns`]: its nodes as network namespaces (namespace hosts); [`directory`]: the
//!   cluster file's nodes given to every agent.
//! * [`workload`]: a program's options (`throttle_proto::workload`), checked, with a
//!   command's template parsed; [`job`]: one job on the cluster (launch, wait, renew, clean up; or an
//!   [`external`] command such as `mpirun` run on this host), the step
//!   [`sweep`] and the demo are made of; [`load`]: the machine's CPU load and the
//!   agents' byte counters around each run.
//! * [`store`]: the results database; [`measurements`]: from stored runs to the
//!   [`analysis`]'s input; [`report`]: plots and the HTML report.
//! * [`output`], [`table`], [`progress`]: what the user sees.
//! * [`shared_dir`]: files in directories other users may write (no link followed, new
//!   files exclusive, private directories checked on their descriptor).
//!
//! The values shared with the agents and the workloads are `throttle_proto`'s.

pub mod agent_client;
pub mod analysis;
pub mod certs;
pub mod cluster;
pub mod commands;
pub mod directory;
pub mod external;
pub mod fidelity;
pub mod hostlist;
pub mod intercept;
pub mod job;
pub mod load;
pub mod local_cluster;
pub mod measurements;
pub mod models;
pub mod netns;
pub mod output;
pub mod progress;
pub mod report;
pub mod shared_dir;
pub mod slurm;
pub mod store;
pub mod sweep;
pub mod table;
pub mod workload;
