//! `throttle-ctl local up|down`: a cluster of agents on this machine's loopback addresses.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args as ClapArgs, Subcommand};
use serde_json::json;
use throttle_proto::Rate;

use super::{Context, Exit};
use crate::cluster::local::{self as local_cluster, LocalUp};
use crate::cluster::Cluster;
use crate::output;

#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: LocalCommand,
}

#[derive(Subcommand, Debug)]
enum LocalCommand {
    /// Start N agents on 127.0.1.1, 127.0.1.2, ... (or N namespace hosts with --netns)
    /// and write the cluster file.
    #[command(
        after_help = "Examples:\n  throttle-ctl local up --nodes 4 --capacity 1Gbit\n  throttle-ctl local up --nodes 2 --tls          HTTPS control APIs with a fresh cluster CA\n  sudo throttle-ctl local up --netns --nodes 4   namespace hosts: throttle unmodified programs\n\nA loopback cluster (the default, no root) shares one network stack: every node is a\nloopback address (127.0.1.1, ...) whose agent serves the preload library, and\n`throttle-ctl exec NODE -- CMD` runs an unmodified program as that node (its TCP\nconnections to the other nodes through the agents). With --netns (root) every node is a\nnetwork namespace (throttle-TAG-nI) on a bridge (thrTAG), with an address from\n198.18.0.0/15 (.1, .2, ...; this host is .254), and its agent intercepts every TCP\nconnection from that node to another node's address: run programs in a node with\n`throttle-ctl exec NODE -- CMD`, or mpirun with `--mca plm_rsh_agent \"throttle-ctl exec\"`."
    )]
    Up {
        /// How many nodes (agents) to start.
        #[arg(long, default_value_t = 4)]
        nodes: usize,
        /// Emulated link capacity per node and direction (payload): 1Gbit, 10Gbit, 125MB.
        #[arg(long, default_value = "1Gbit")]
        capacity: Rate,
        /// First loopback address.
        #[arg(long, default_value = "127.0.1.1")]
        base_addr: Ipv4Addr,
        /// How far behind its schedule a backlogged stream may catch up on every agent, ms
        /// (throttle-agent --catch-up-ms).
        #[arg(long, alias = "burst-ms", default_value_t = 10.0)]
        catch_up_ms: f64,
        /// Scheduling priority of the agents (throttle-agent --priority): `realtime`
        /// (SCHED_RR) runs them before every ordinary process on this machine, so that a
        /// busy machine does not make their links late; `high` (nice -10) ahead of the
        /// ranks; `normal` to see what they would do without. Both need root or
        /// CAP_SYS_NICE: an agent refused falls back to the next one, and `up` says so.
        #[arg(long, default_value = "realtime", value_parser = ["normal", "high", "realtime"])]
        agent_priority: String,
        /// Worker threads per agent [default: 1, as several agents share this machine].
        #[arg(long, default_value_t = 1)]
        agent_threads: usize,
        /// State directory for the token, sockets and logs [default: .throttle-local next to the cluster file].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Serve the agents' control APIs over TLS, with certificates from a fresh cluster
        /// CA (written to the state directory; the cluster file's tls_ca names it).
        #[arg(long)]
        tls: bool,
        /// Namespace hosts (root): one network namespace per node on a bridge, agents that
        /// intercept programs' connections to the other nodes.
        #[arg(long)]
        netns: bool,
        /// The /24 of 198.18.0.0/15 for namespace hosts [default: the first one unused here].
        #[arg(long, requires = "netns", value_name = "198.18.S.0/24")]
        subnet: Option<String>,
        /// How namespace hosts' agents intercept programs' connections: kernel (nftables
        /// redirect, delivered from the original source) or preload (the LD_PRELOAD
        /// library, which `throttle-ctl exec` then loads into every command: the path for
        /// clusters without root).
        #[arg(long, requires = "netns", value_enum, default_value = "kernel")]
        intercept: crate::intercept::Mode,
        /// Pin the agents to the first quarter of this machine's cores (at least one) and
        /// every rank they launch to the others, so ranks and agents do not compete for
        /// cores (less timing noise); the processes `throttle-ctl exec` starts (an
        /// mpirun's daemons and ranks, a command's) run on the ranks' cores too.
        #[arg(long)]
        pin: bool,
        /// How the links are emulated. proxy: the agents carry every connection between
        /// nodes and pace its bytes (added latency works; every message pays the agents'
        /// hop, and the agents need a CPU when a byte is due). kernel: programs connect to
        /// each other directly and Linux paces each socket at its max-min share of its
        /// node's egress and its peer's ingress, set by the agents (no byte passes an
        /// agent; no added latency). kernel needs the preload library: a loopback cluster,
        /// or --netns --intercept preload.
        #[arg(long, value_enum, default_value = "proxy")]
        links: Links,
        /// Let the agents launch this program too (`run --workload program --program
        /// PATH`; throttle-agent --allow-program); repeatable. Only throttle's workloads
        /// are allowed otherwise.
        #[arg(long = "allow-program", value_name = "PATH")]
        allow_programs: Vec<PathBuf>,
        /// Let the agents launch every program in this directory (throttle-agent
        /// --allow-dir; never one holding a shell or one others can write to); repeatable.
        #[arg(long = "allow-dir", value_name = "DIR")]
        allow_dirs: Vec<PathBuf>,
        /// Print the cluster as JSON instead of the cluster file.
        #[arg(long)]
        json: bool,
    },
    /// Start one node's agent again (killed, crashed, or running: stopped first), with the
    /// flags and addresses `local up` gave it; its log goes on in the same file.
    #[command(after_help = "Example:\n  throttle-ctl local restart n1\n  throttle-ctl status")]
    Restart {
        /// The node whose agent to restart.
        node: String,
        /// Print the node's new entry as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop the local cluster's agents and remove its state and cluster file (nothing to
    /// do, and no error, when there is none).
    #[command(
        after_help = "While programs still run on the nodes (an mpirun's ranks in namespace hosts, a job\nthe agents launched), `down` refuses: stopping the agents would cut them off. --force\nends them first (SIGTERM, then SIGKILL after 2 s)."
    )]
    Down {
        /// End the programs still running on the nodes, then stop.
        #[arg(long)]
        force: bool,
        /// Keep the agents' logs: copied to throttle-local-logs/ beside the cluster file
        /// (the state directory, where they are, is removed).
        #[arg(long)]
        keep_logs: bool,
        /// Print what was stopped as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// How a local cluster's links are emulated (`local up --links`; the agents' `--links`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Links {
    Proxy,
    Kernel,
}

impl Args {
    pub fn exec(self, ctx: &Context) -> Exit {
        match self.command {
            LocalCommand::Up {
                nodes,
                capacity,
                base_addr,
                catch_up_ms,
                agent_priority,
                agent_threads,
                dir,
                tls,
                netns,
                subnet,
                intercept,
                pin,
                links,
                allow_programs,
                allow_dirs,
                json,
            } => {
                if links == Links::Kernel && netns && intercept != crate::intercept::Mode::Preload {
                    anyhow::bail!("--links kernel needs the preload library to register the programs' sockets: a loopback cluster (no --netns), or --netns --intercept preload");
                }
                let netns = match (netns, subnet) {
                    (false, _) => None,
                    (true, None) => Some(None),
                    (true, Some(s)) => Some(Some(crate::cluster::netns::parse_subnet(&s)?)),
                };
                let dir = dir.unwrap_or_else(|| {
                    ctx.cluster_path
                        .parent()
                        .map(|p| p.join(".throttle-local"))
                        .unwrap_or_else(|| PathBuf::from(".throttle-local"))
                });
                let mut agent_args = vec![
                    "--catch-up-ms".into(),
                    catch_up_ms.to_string(),
                    "--threads".into(),
                    agent_threads.to_string(),
                ];
                let mut rank_cpus = None;
                if pin {
                    let (args, ranks) = local_cluster::pin_args()?;
                    agent_args.extend(args);
                    rank_cpus = Some(ranks);
                }
                agent_args.extend(allow_args(&allow_programs, &allow_dirs)?);
                let req = LocalUp {
                    nodes,
                    capacity,
                    base_addr,
                    dir,
                    priority: agent_priority,
                    agent_args,
                    rank_cpus,
                    tls,
                    netns,
                    intercept,
                    kernel_links: links == Links::Kernel,
                };
                let cluster = local_cluster::up(&req, &ctx.cluster_path)?;
                print_up(ctx, &cluster, json)?;
            }
            LocalCommand::Restart { node, json } => restart(ctx, &node, json)?,
            LocalCommand::Down {
                force,
                keep_logs,
                json,
            } => down(ctx, local_cluster::Down { force, keep_logs }, json)?,
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The agents' `--allow-program` and `--allow-dir` flags, with absolute paths.
fn allow_args(allow_programs: &[PathBuf], allow_dirs: &[PathBuf]) -> anyhow::Result<Vec<String>> {
    let mut args = Vec::new();
    // The agents run elsewhere (their state directory): absolute paths.
    for (flag, paths) in [
        ("--allow-program", allow_programs),
        ("--allow-dir", allow_dirs),
    ] {
        for p in paths {
            let abs = std::path::absolute(p)
                .map_err(|e| anyhow::anyhow!("{flag} {}: {e}", p.display()))?;
            args.push(flag.into());
            args.push(abs.display().to_string());
        }
    }
    Ok(args)
}

/// Print the cluster `local up` started: as JSON, or its cluster file.
fn print_up(ctx: &Context, cluster: &Cluster, json: bool) -> anyhow::Result<()> {
    if json {
        output::print_json(&json!({
            "cluster_file": ctx.cluster_path,
            "cluster": cluster.file,
        }))?;
    } else {
        output::print(up_summary(cluster, &ctx.cluster_path))?;
    }
    Ok(())
}

/// What `local up` says: the nodes, where they are, and what to do next (the cluster
/// file itself is for programs: `--json` or the file).
fn up_summary(cluster: &Cluster, path: &std::path::Path) -> String {
    let f = &cluster.file;
    let kind = match &f.namespaces {
        Some(_) => "namespace hosts",
        None => "loopback cluster, no root needed",
    };
    let mut out = format!(
        "started {} agents ({kind}), links of {} each way; cluster file {}\n",
        f.nodes.len(),
        f.capacity,
        path.display()
    );
    out.push_str(&format!(
        " {:<6} {:<18} {}\n",
        "node", "address", "agent pid"
    ));
    for n in &f.nodes {
        let addr = n.address.unwrap_or_else(|| n.data.ip());
        let pid = n.pid.map_or("?".to_string(), |p| p.to_string());
        out.push_str(&format!(
            " {:<6} {:<18} {pid}\n",
            n.name.as_str(),
            addr.to_string()
        ));
    }
    if let (Some(first), Some(second)) = (f.nodes.first(), f.nodes.get(1)) {
        let to = second.address.unwrap_or_else(|| second.data.ip());
        out.push_str(&format!(
            "next: throttle-ctl set 30; throttle-ctl exec {} -- iperf3 -s -D -1; throttle-ctl exec {} -- iperf3 -c {to}\n",
            second.name.as_str(),
            first.name.as_str()
        ));
    }
    out.push_str(&format!(
        "capacity: every answer is in % of this {} link; `throttle-ctl calibrate` measures what this machine carries with every link busy and suggests a capacity its agents hold beside the ranks (docs/local.md, \"Choosing the capacity\")\n",
        f.capacity
    ));
    out.push_str("stop: throttle-ctl local down\n");
    out
}

/// `local restart NODE`: start the node's agent again and say where it serves.
fn restart(ctx: &Context, node: &str, json: bool) -> anyhow::Result<()> {
    let n = local_cluster::restart(&ctx.cluster_path, node)?;
    if json {
        output::print_json(&n)?;
    } else {
        output::print(format!(
            "restarted node {}'s agent (pid {}), control {}, data {}\n",
            n.name,
            n.pid.map(|p| p.to_string()).unwrap_or_else(|| "?".into()),
            n.control,
            n.data
        ))?;
    }
    Ok(())
}

/// `local down`: stop the local cluster and say what was stopped.
fn down(ctx: &Context, how: local_cluster::Down, json: bool) -> anyhow::Result<()> {
    let stopped = local_cluster::down_with(&ctx.cluster_path, how)?;
    if json {
        output::print_json(&json!({
            "cluster_file": ctx.cluster_path,
            "stopped": stopped.clone().unwrap_or_default(),
        }))?;
    } else {
        match stopped {
            Some(s) => output::print(format!(
                "stopped {} agents ({}); removed {}\n",
                s.len(),
                s.join(", "),
                ctx.cluster_path.display()
            ))?,
            None => output::print(format!(
                "no local cluster at {}: nothing to stop\n",
                ctx.cluster_path.display()
            ))?,
        }
    }
    Ok(())
}
