//! Starting programs on this node for a token holder: which programs may run
//! ([`programs`], with [`launchers`]: which of them can start others), launching and
//! watching a job's ranks ([`jobs`]), the one thread ranks are forked from so that they
//! die with the agent ([`spawner`]), where they run and at what priority ([`affinity`],
//! [`cpu`]), and the directories only the agent's user may enter ([`private_dir`]).
//!
//! Apart from the transport and the link: a launched rank talks to other ranks through
//! the agent like any program; nothing here moves bytes.

pub mod affinity;
pub mod cpu;
pub mod jobs;
pub mod launchers;
pub mod private_dir;
pub mod programs;
pub mod spawner;
