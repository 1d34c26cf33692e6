//! `throttle-ctl cluster init`: the cluster file of a real cluster, written for you from
//! a host list, a hostfile or the Slurm job's node list, with a fresh token; and the
//! agent command line each node needs to match it.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context as _, Result};
use clap::{Args as ClapArgs, Subcommand};
use serde_json::json;
use throttle_proto::{Name, Rate};

use super::{Context, Exit};
use crate::cluster::hostlist;
use crate::cluster::{ClusterFile, Node};
use crate::output;

#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Subcommand, Debug)]
enum ClusterCommand {
    /// Write the cluster file (and a fresh token) for agents on real hosts.
    #[command(after_help = "Where the hosts come from (one of):
  --hosts n0=10.0.0.1,n1=10.0.0.2    names and addresses (or host names: node01,node02)
  --hosts 'node[01-16]'              Slurm's bracket syntax
  --hostfile hosts                   Open MPI (host slots=N), MPICH (host:N) or Slurm style
  --slurm                            this job's nodes (SLURM_JOB_NODELIST)

Then start on every node the agent line it prints, with a copy of the token file
(mode 600), and check with `throttle-ctl status`.

Examples:
  throttle-ctl cluster init --hosts 'node[01-08]' --capacity 10Gbit
  throttle-ctl --cluster job.toml cluster init --slurm --capacity 100Gbit --json")]
    Init(InitArgs),
}

#[derive(ClapArgs, Debug)]
struct InitArgs {
    /// Hosts: NAME=ADDRESS or host names, comma-separated; Slurm brackets expand.
    #[arg(long, conflicts_with_all = ["hostfile", "slurm"], required_unless_present_any = ["hostfile", "slurm"])]
    hosts: Option<String>,
    /// A hostfile (Open MPI, MPICH or Slurm style).
    #[arg(long, conflicts_with = "slurm")]
    hostfile: Option<PathBuf>,
    /// The nodes of the Slurm job this runs in (SLURM_JOB_NODELIST, else SLURM_NODELIST),
    /// at the address Slurm reaches each at (`scontrol show node`: NodeAddr).
    #[arg(long)]
    slurm: bool,
    /// The link capacity of every node (what 100% means), e.g. 10Gbit, 25Gbit.
    #[arg(long)]
    capacity: Rate,
    /// The agents' control API port.
    #[arg(long, default_value_t = 7600)]
    control_port: u16,
    /// The agents' data port (agent to agent).
    #[arg(long, default_value_t = 7601)]
    data_port: u16,
    /// Where each agent's local socket is, on its node [default: /run/throttle for root,
    /// /tmp/throttle-UID for others (UID: yours)].
    #[arg(long)]
    socket_dir: Option<PathBuf>,
    /// The token file to write [default: throttle-token next to the cluster file].
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Replace an existing cluster file and token.
    #[arg(long)]
    force: bool,
    #[arg(long)]
    json: bool,
}

impl Args {
    pub fn exec(self, ctx: &Context) -> Exit {
        match self.command {
            ClusterCommand::Init(a) => a.exec(ctx),
        }
    }
}

/// One host as listed: its node name and how to reach it.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    pub name: String,
    pub host: String,
}

/// `--hosts`: `NAME=ADDRESS` items, or host names (Slurm brackets expand), which name
/// their nodes themselves.
pub fn parse_hosts(text: &str) -> Result<Vec<Listed>> {
    let mut out = Vec::new();
    for host in hostlist::expand(text)? {
        match host.split_once('=') {
            Some((name, addr)) => out.push(Listed {
                name: name.trim().to_string(),
                host: addr.trim().to_string(),
            }),
            None => out.push(Listed {
                name: host.clone(),
                host,
            }),
        }
    }
    Ok(out)
}

/// The address of `host` (an IP, or a name the resolver knows; IPv4 first).
fn resolve(host: &str) -> Result<IpAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip);
    }
    let addrs: Vec<SocketAddr> = (host, 0)
        .to_socket_addrs()
        .map_err(|e| anyhow!("{e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .map(|a| a.ip())
        .ok_or_else(|| anyhow!("no address"))
}

/// The agents' socket directory when none is given, as the agent picks it for a user
/// without XDG_RUNTIME_DIR.
fn default_socket_dir() -> PathBuf {
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        PathBuf::from("/run/throttle")
    } else {
        PathBuf::from(format!("/tmp/throttle-{}", uid.as_raw()))
    }
}

/// The cluster file for `listed` hosts (names checked, addresses resolved; every problem
/// named at once).
pub fn build(
    listed: &[Listed],
    capacity: Rate,
    control_port: u16,
    data_port: u16,
    socket_dir: &Path,
    token_file: &Path,
) -> Result<ClusterFile> {
    if control_port == data_port {
        bail!("--control-port and --data-port must differ (both {control_port})");
    }
    let mut nodes = Vec::new();
    let mut problems = Vec::new();
    for l in listed {
        let name = match Name::parse("node name", &l.name) {
            Ok(n) => n,
            Err(e) => {
                problems.push(format!("`{}`: {e}", l.name));
                continue;
            }
        };
        if nodes.iter().any(|n: &Node| n.name == name) {
            problems.push(format!("`{}` is listed twice", l.name));
            continue;
        }
        let ip = match resolve(&l.host) {
            Ok(ip) => ip,
            Err(e) => {
                problems.push(format!("`{}`: cannot resolve {} ({e})", l.name, l.host));
                continue;
            }
        };
        if ip.is_unspecified() || ip.is_multicast() {
            problems.push(format!("`{}`: {ip} is not a host's address", l.name));
            continue;
        }
        nodes.push(Node {
            socket: socket_dir.join(format!("{name}.sock")),
            control: SocketAddr::new(ip, control_port),
            data: SocketAddr::new(ip, data_port),
            address: Some(ip),
            preload: None,
            name,
            pid: None,
            netns: None,
        });
    }
    if !problems.is_empty() {
        bail!(
            "{} host(s) cannot be nodes:\n  {}",
            problems.len(),
            problems.join("\n  ")
        );
    }
    Ok(ClusterFile {
        token_file: token_file.to_path_buf(),
        capacity,
        local_dir: None,
        tls_ca: None,
        namespaces: None,
        rank_cpus: None,
        nodes,
    })
}

/// The agent command line that matches `node` in `file`.
pub fn agent_line(file: &ClusterFile, node: &Node, token_on_node: &str) -> Vec<String> {
    vec![
        "throttle-agent".into(),
        "--node".into(),
        node.name.to_string(),
        "--control".into(),
        node.control.to_string(),
        "--data".into(),
        node.data.to_string(),
        "--local-socket".into(),
        node.socket.display().to_string(),
        "--capacity".into(),
        file.capacity.to_string().replace(' ', ""),
        "--token-file".into(),
        token_on_node.into(),
    ]
}

impl InitArgs {
    fn exec(self, ctx: &Context) -> Exit {
        let listed = if let Some(h) = &self.hosts {
            parse_hosts(h)?
        } else if let Some(f) = &self.hostfile {
            let text = std::fs::read_to_string(f)
                .with_context(|| format!("cannot read the hostfile {}", f.display()))?;
            hostlist::hostfile(&text)
                .with_context(|| format!("{}", f.display()))?
                .into_iter()
                .map(|h| Listed {
                    name: h.clone(),
                    host: h,
                })
                .collect()
        } else {
            let list = std::env::var("SLURM_JOB_NODELIST")
                .or_else(|_| std::env::var("SLURM_NODELIST"))
                .map_err(|_| anyhow!("--slurm: SLURM_JOB_NODELIST is not set: run this inside a Slurm allocation (salloc, sbatch), or list the hosts with --hosts"))?;
            // The address Slurm reaches each node at (its NodeAddr), where it says.
            let addrs = crate::cluster::slurm::ask_node_addrs();
            hostlist::expand(&list)
                .with_context(|| format!("SLURM_JOB_NODELIST={list}"))?
                .into_iter()
                .map(|h| Listed {
                    host: addrs.get(&h).cloned().unwrap_or_else(|| h.clone()),
                    name: h,
                })
                .collect()
        };
        let cluster_path = &ctx.cluster_path;
        let token_path = self.token_file.clone().unwrap_or_else(|| {
            cluster_path
                .parent()
                .map(|d| d.join("throttle-token"))
                .unwrap_or_else(|| PathBuf::from("throttle-token"))
        });
        for p in [cluster_path, &token_path] {
            if p.exists() && !self.force {
                bail!(
                    "{} exists: pass --force to replace it (the agents started with the old token will refuse the new one)",
                    p.display()
                );
            }
        }
        let socket_dir = self.socket_dir.clone().unwrap_or_else(default_socket_dir);
        // The cluster file names the token relative to itself when it sits beside it.
        let token_in_file = match (token_path.parent(), cluster_path.parent()) {
            (Some(t), Some(c)) if t == c => {
                PathBuf::from(token_path.file_name().unwrap_or_default())
            }
            _ => std::path::absolute(&token_path)?,
        };
        let file = build(
            &listed,
            self.capacity,
            self.control_port,
            self.data_port,
            &socket_dir,
            &token_in_file,
        )?;
        crate::cluster::write_new_token(&token_path)?;
        file.write(cluster_path)?;
        let lines: Vec<(String, Vec<String>)> = file
            .nodes
            .iter()
            .map(|n| (n.name.to_string(), agent_line(&file, n, "TOKEN_FILE")))
            .collect();
        if self.json {
            output::print_json(&json!({
                "cluster_file": cluster_path,
                "token_file": token_path,
                "nodes": file.nodes.len(),
                "agents": lines.iter().map(|(n, l)| json!({"node": n, "args": l})).collect::<Vec<_>>(),
            }))?;
        } else {
            let mut text = format!(
                "wrote {} ({} nodes, {} each) and a fresh token in {} (mode 600)\n\nstart on each node, with a copy of the token file as TOKEN_FILE (mode 600):\n",
                cluster_path.display(),
                file.nodes.len(),
                file.capacity,
                token_path.display()
            );
            for (name, l) in &lines {
                text.push_str(&format!("  {name}: {}\n", l.join(" ")));
            }
            text.push_str(&format!(
                "\nopen TCP ports {} (control, from this host) and {} (data, between the nodes); then check with `throttle-ctl status`\n",
                self.control_port, self.data_port
            ));
            output::print(text)?;
        }
        Ok(ExitCode::SUCCESS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_name_their_nodes_or_are_named() {
        assert_eq!(
            parse_hosts("n0=198.18.70.1, n1=198.18.70.2").unwrap(),
            [
                Listed {
                    name: "n0".into(),
                    host: "198.18.70.1".into()
                },
                Listed {
                    name: "n1".into(),
                    host: "198.18.70.2".into()
                },
            ]
        );
        let l = parse_hosts("198.18.70.[1-2]").unwrap();
        assert_eq!(l[1].name, "198.18.70.2");
    }

    #[test]
    fn a_cluster_file_from_hosts_with_every_problem_named() {
        let ok = parse_hosts("a=198.18.70.1,b=198.18.70.2").unwrap();
        let f = build(
            &ok,
            "10Gbit".parse().unwrap(),
            7600,
            7601,
            Path::new("/run/throttle"),
            Path::new("throttle-token"),
        )
        .unwrap();
        assert_eq!(f.nodes.len(), 2);
        assert_eq!(f.nodes[1].control.to_string(), "198.18.70.2:7600");
        assert_eq!(f.nodes[1].data.to_string(), "198.18.70.2:7601");
        assert_eq!(f.nodes[0].socket, Path::new("/run/throttle/a.sock"));
        let line = agent_line(&f, &f.nodes[0], "/etc/throttle/token").join(" ");
        assert_eq!(line, "throttle-agent --node a --control 198.18.70.1:7600 --data 198.18.70.1:7601 --local-socket /run/throttle/a.sock --capacity 10Gbit/s --token-file /etc/throttle/token");
        let bad = parse_hosts(
            "../x=198.18.70.1,a=198.18.70.2,a=198.18.70.3,c=no.such.host.invalid,d=0.0.0.0",
        )
        .unwrap();
        let e = build(
            &bad,
            "1Gbit".parse().unwrap(),
            7600,
            7601,
            Path::new("/tmp"),
            Path::new("t"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("4 host(s)"), "{e}");
        assert!(
            e.contains("`../x`")
                && e.contains("listed twice")
                && e.contains("cannot resolve no.such.host.invalid")
                && e.contains("0.0.0.0"),
            "{e}"
        );
        let e = build(
            &ok,
            "1Gbit".parse().unwrap(),
            7600,
            7600,
            Path::new("/tmp"),
            Path::new("t"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("must differ"), "{e}");
    }
}
