//! `throttle-ctl exec NODE [--] COMMAND...`: run a command inside a node of a local
//! cluster, the way `ssh HOST COMMAND...` runs it on a host: in the node's network
//! namespace (namespace hosts), or on this host as the node of a loopback cluster (the
//! preload library loaded, naming that node's agent).
//!
//! Like ssh, the words of the command are joined with spaces and run by `/bin/sh -c`, so
//! Open MPI can use it as its launch agent (`mpirun --mca plm_rsh_agent "throttle-ctl
//! exec"` calls `AGENT HOST orted -mca ess "env" ...`, quoting meant for a remote shell).
//! NODE is a node's name (`n0`) or its address (hostfiles often list addresses). The
//! command replaces this process (exec), so its exit status and signals are its own.
//!
//! In a cluster whose agents serve the preload library (`local up --intercept preload`),
//! or with `--intercept preload` or `THROTTLE_INTERCEPT=preload`, the command runs with
//! the library in `LD_PRELOAD` (and `THROTTLE_PRELOAD_LIB` naming it), so its
//! connections to other nodes go through the agents; the variables pass on to whatever
//! it starts (mpirun's daemons and their ranks).

use anyhow::{anyhow, bail};
use clap::Args as ClapArgs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use super::{Context, Exit};

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "Examples:\n  throttle-ctl exec n1 -- iperf3 -s -D -1\n  throttle-ctl exec n0 -- iperf3 -c 127.0.1.2 -t 5      (a loopback cluster: n1 is 127.0.1.2)\n  throttle-ctl exec 198.18.0.2 'iperf3 -c 198.18.0.1 -t 5'   (namespace hosts)\n  mpirun --mca plm_rsh_agent \"throttle-ctl exec\" --hostfile hosts -np 4 ./app\n\nOn namespace hosts the command runs in the node's network namespace (so it needs\nroot); on a loopback cluster it runs on this host as the node, without root: the\npreload library in LD_PRELOAD (THROTTLE_PRELOAD_AGENT naming the node's agent) carries\nits TCP connections to the other nodes through the agents, gives its wildcard binds the\nnode's address and shows that address on the loopback interface, and\nOMPI_MCA_btl_tcp_if_include=lo is set unless Open MPI's interfaces are chosen already,\nand UCX_NET_DEVICES=lo unless set (UCX over TCP would open a lane over this host's\nother interfaces, which no agent sees).\nEither way it runs with this process's environment and working directory, TMPDIR set\nto the node's own temporary directory in the cluster's state directory (as on separate hosts), and with\nOMPI_MCA_mpi_yield_when_idle=1 unless set: all nodes share this machine's cores, and\nbusy-polling Open MPI ranks starved each other and the agents (--mca\nmpi_yield_when_idle 0 or the variable set to 0 restores busy polling).\nSet THROTTLE_CLUSTER to an absolute path when the command runs elsewhere (mpirun's\ndaemons call exec again from the nodes)."
)]
pub struct Args {
    /// Load the preload library into the command (`preload`), or not (`kernel`: the
    /// kernel redirect needs nothing) [default: THROTTLE_INTERCEPT, else the cluster's].
    #[arg(long, value_enum, value_name = "MODE")]
    intercept: Option<crate::intercept::Mode>,
    /// The node: its name in the cluster file, or its address.
    node: String,
    /// The command and its arguments, joined with spaces and run by /bin/sh -c (as ssh
    /// does).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<String>,
}

/// Open MPI's "yield the CPU while waiting" setting, as an environment variable.
const YIELD_WHEN_IDLE: &str = "OMPI_MCA_mpi_yield_when_idle";
/// Open MPI's TCP transport's interfaces, as environment variables.
const IF_INCLUDE: &str = "OMPI_MCA_btl_tcp_if_include";
const IF_EXCLUDE: &str = "OMPI_MCA_btl_tcp_if_exclude";
/// UCX's network devices (Open MPI's `--mca pml ucx` over `UCX_TLS=tcp`).
const UCX_DEVICES: &str = "UCX_NET_DEVICES";

/// The node's own temporary directory in the cluster's state directory (made, private),
/// as on a real host: programs that keep per-host state in TMPDIR (Open MPI's session
/// directories) must not collide. `None` for a cluster without a state directory.
fn node_tmp(cluster: &crate::cluster::Cluster, node: &str) -> anyhow::Result<Option<PathBuf>> {
    let Some(t) = cluster
        .file
        .local_dir
        .as_ref()
        .map(|d| d.join(format!("tmp-{node}")))
    else {
        return Ok(None);
    };
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(&t) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => bail!(
            "cannot create the node's temporary directory {}: {e}",
            t.display()
        ),
    }
    Ok(Some(t))
}

/// What a command needs to run as node `node` of a loopback cluster, whose agent's
/// preload port is `agent`: that agent up (else refused), its address for the library,
/// and Open MPI told to use the loopback interface, where the node's address is. The
/// kernel redirect (`asked`) is refused: it needs namespace hosts.
fn as_loopback_node(
    cmd: &mut std::process::Command,
    node: &str,
    agent: std::net::SocketAddr,
    asked: Option<crate::intercept::Mode>,
) -> anyhow::Result<()> {
    if asked == Some(crate::intercept::Mode::Kernel) {
        bail!(
            "node `{node}` is a node of a loopback cluster, where only the preload library intercepts, and the kernel redirect was asked (--intercept kernel, or {}=kernel in the environment); the kernel redirect needs namespace hosts: `local up --netns`, as root",
            crate::intercept::ENV
        );
    }
    // Without its agent the command would run as no node at all (its binds and
    // interfaces this host's) and unthrottled: refused, as ssh to a host that is down
    // fails. Only an agent of this user's (or root's) counts.
    let me = nix::unistd::geteuid().as_raw();
    match throttle_proto::os::socket_table::listener_owner(agent) {
        Some(uid) if uid == me || uid == 0 => {}
        _ => bail!(
            "node `{node}`'s agent does not listen at its preload port {agent} (it stopped, or crashed): start it again with `throttle-ctl local restart {node}`"
        ),
    }
    // The library asks this node's agent which node it is, and hands its connections to
    // the others over to it.
    cmd.env("THROTTLE_PRELOAD_AGENT", agent.to_string());
    // Open MPI's TCP transport publishes its interfaces' addresses and leaves out
    // loopback by default: on a loopback cluster the node's address is on the loopback
    // interface (as the library shows it).
    if std::env::var_os(IF_INCLUDE).is_none() && std::env::var_os(IF_EXCLUDE).is_none() {
        cmd.env(IF_INCLUDE, "lo");
    }
    // UCX over TCP opens a lane per interface: one over this host's other addresses
    // (eth0) reaches the peer's process outside every node's address, so no agent sees
    // it. Measured: a 4 MiB ping-pong at 30% of 1 Gbit/s took 118.8 ms with every
    // device, 245.8 ms with `lo` only (TCP through the agents 240.3 ms, serialization
    // 224 ms).
    if std::env::var_os(UCX_DEVICES).is_none() {
        cmd.env(UCX_DEVICES, "lo");
    }
    Ok(())
}

/// Where a node's commands run.
enum Place {
    /// In the node's network namespace.
    Namespace(String),
    /// On this host's network stack, as the node of a loopback cluster whose agent's
    /// preload port is here.
    Loopback(std::net::SocketAddr),
}

impl Args {
    pub fn exec(self, ctx: &Context) -> Exit {
        let cluster = ctx.cluster()?;
        let node = cluster.node_by_name_or_address(&self.node)?;
        let place = match (&node.netns, node.preload) {
            (Some(ns), _) => Place::Namespace(ns.clone()),
            (None, Some(agent)) if agent.ip().is_loopback() => Place::Loopback(agent),
            _ => bail!(
                "node `{}` is neither a namespace host nor a node of a loopback cluster: `exec` runs commands in the nodes of a cluster started with `throttle-ctl local up` (with or without --netns); on real hosts use ssh",
                node.name
            ),
        };
        let words: Vec<&str> = match self.command.first().map(String::as_str) {
            Some("--") => self.command[1..].iter().map(String::as_str).collect(),
            _ => self.command.iter().map(String::as_str).collect(),
        };
        if words.is_empty() {
            bail!("no command given: throttle-ctl exec NODE -- COMMAND...");
        }
        let line = words.join(" ");
        let tmp = node_tmp(&cluster, &node.name)?;
        let asked = match (self.intercept, std::env::var(crate::intercept::ENV)) {
            (Some(m), _) => Some(m),
            (None, Ok(v)) if !v.is_empty() => Some(
                crate::intercept::Mode::parse(&v)
                    .map_err(|e| anyhow!("{}: {e}", crate::intercept::ENV))?,
            ),
            _ => None,
        };
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(&line);
        let mode = match &place {
            Place::Namespace(ns) => {
                crate::cluster::netns::enter(ns)?;
                asked.unwrap_or_else(|| {
                    cluster
                        .file
                        .namespaces
                        .as_ref()
                        .map_or(crate::intercept::Mode::Kernel, |n| n.intercept)
                })
            }
            Place::Loopback(agent) => {
                as_loopback_node(&mut cmd, node.name.as_str(), *agent, asked)?;
                crate::intercept::Mode::Preload
            }
        };
        if let Some(t) = &tmp {
            cmd.env("TMPDIR", t);
        }
        // `local up --pin`: the command's processes on the ranks' cores, off the agents'.
        if let Some(cpus) = &cluster.file.rank_cpus {
            let mut set = nix::sched::CpuSet::new();
            for &c in cpus.cpus() {
                set.set(c)
                    .map_err(|e| anyhow!("the cluster file's rank_cpus {cpus}: {e}"))?;
            }
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(|e| {
                anyhow!(
                    "cannot run node `{}`'s command on CPUs {cpus} (local up --pin): {e}",
                    node.name
                )
            })?;
        }
        // Every node of a local cluster shares this machine's cores: an MPI rank that
        // busy-polls while it waits takes a core its own node would have to itself, from
        // the other ranks and from the agents. Open MPI yields instead when told to; a
        // setting of the user's own (environment or --mca) wins.
        if std::env::var_os(YIELD_WHEN_IDLE).is_none() {
            cmd.env(YIELD_WHEN_IDLE, "1");
        }
        if mode == crate::intercept::Mode::Preload {
            let lib = crate::intercept::library()?;
            for p in crate::intercept::static_programs(&line) {
                crate::note!(
                    "throttle-ctl exec: warning: {} is statically linked: the preload library cannot reach it, its connections are not throttled",
                    p.display()
                );
            }
            cmd.env("LD_PRELOAD", crate::intercept::ld_preload_with(&lib))
                .env(crate::intercept::LIB_ENV, &lib)
                .env(crate::intercept::ENV, "preload");
        }
        let e = cmd.exec();
        Err(anyhow!(
            "cannot run /bin/sh -c {line:?} in node `{}`: {e}",
            node.name
        ))
    }
}
