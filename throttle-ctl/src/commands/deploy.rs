//! `throttle-ctl deploy start|status|stop`: agents on the cluster file's hosts over ssh.
//!
//! The system `ssh` client is used as it is (so `~/.ssh/config`, agents and jump hosts
//! work), with `BatchMode` so a host that wants a password fails instead of waiting. On
//! each host, in parallel: the agent and the workloads are copied (through ssh's stdin;
//! no scp needed) with the token into `REMOTE_DIR/NODE/` (mode 700), and the agent is
//! started there as a plain background process with its pid in `agent.pid`; `start`
//! waits until its control API answers. One table row per host; a failed host does not
//! stop the others, and the exit code is 1 when any failed.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use clap::{Args as ClapArgs, Subcommand};
use serde::Serialize;
use throttle_analysis::table::Table;

use super::{Context, Exit};
use crate::cluster::agent_client::AgentClient;
use crate::cluster::{Cluster, Node};
use crate::output;

/// The workload programs copied with the agent (the agent's default allow-list).
const WORKLOADS: [&str; 5] = [
    "throttle-bfs",
    "throttle-pmm",
    "throttle-mw",
    "throttle-loggps",
    "throttle-selftest",
];

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "The cluster file (throttle-ctl cluster init) says which hosts; ssh is reached at
each node's address (--ssh-host name: at its name instead, for ~/.ssh/config entries).

Examples:
  throttle-ctl cluster init --hosts 'node[01-08]' --capacity 10Gbit
  throttle-ctl deploy start                    copy, start, wait until every agent answers
  throttle-ctl deploy status
  throttle-ctl deploy stop
  throttle-ctl deploy start --ssh-option=-i --ssh-option=~/.ssh/cluster_key"
)]
pub struct Args {
    #[command(subcommand)]
    command: DeployCommand,
    #[command(flatten)]
    ssh: SshArgs,
    /// Print each node's result as JSON on standard output (progress stays on standard
    /// error).
    #[arg(long, global = true)]
    json: bool,
}

#[derive(ClapArgs, Debug, Clone)]
struct SshArgs {
    /// The ssh client.
    #[arg(long, global = true, default_value = "ssh")]
    ssh: String,
    /// An option for every ssh call (repeatable), e.g. --ssh-option=-i --ssh-option=KEY.
    #[arg(long = "ssh-option", global = true, allow_hyphen_values = true)]
    ssh_options: Vec<String>,
    /// Reach each host at its `address` or its `name`.
    #[arg(long, global = true, default_value = "address", value_parser = ["address", "name"])]
    ssh_host: String,
    /// Directory on the hosts, relative to the login's home unless absolute; each node
    /// uses DIR/NODE.
    #[arg(long, global = true, default_value = ".throttle")]
    remote_dir: String,
}

#[derive(Subcommand, Debug)]
enum DeployCommand {
    /// Copy the agent, the workloads and the token to every host and start the agents.
    Start,
    /// Whether each host's agent process runs and its control API answers.
    Status,
    /// Stop every host's agent.
    Stop,
}

/// One host's outcome.
#[derive(Debug, Serialize)]
struct Row {
    node: String,
    host: String,
    ok: bool,
    detail: String,
}

/// `'text'` for a POSIX shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

struct Ssh<'a> {
    args: &'a SshArgs,
}

impl Ssh<'_> {
    fn target(&self, n: &Node) -> String {
        if self.args.ssh_host == "name" {
            n.name.to_string()
        } else {
            n.address.unwrap_or(n.control.ip()).to_string()
        }
    }

    /// Run `script` on `host` (with `stdin` fed from a file), returning stdout.
    fn run(&self, host: &str, script: &str, stdin: Option<&Path>) -> Result<String> {
        let mut c = Command::new(&self.args.ssh);
        c.args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"])
            .args(&self.args.ssh_options)
            .arg(host)
            .arg(script)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.stdin(match stdin {
            Some(p) => Stdio::from(
                std::fs::File::open(p).with_context(|| format!("cannot read {}", p.display()))?,
            ),
            None => Stdio::null(),
        });
        let out = c
            .output()
            .with_context(|| format!("cannot run `{}`", self.args.ssh))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            bail!("ssh {host}: {} ({})", last.trim(), out.status);
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

/// The files `start` copies: the agent and the workloads next to it.
fn payload() -> Result<Vec<PathBuf>> {
    let agent = crate::cluster::local::agent_binary()?;
    let dir = agent
        .parent()
        .ok_or_else(|| anyhow!("{} has no directory", agent.display()))?
        .to_path_buf();
    let mut files = vec![agent];
    for w in WORKLOADS {
        let p = dir.join(w);
        if p.is_file() {
            files.push(p);
        }
    }
    Ok(files)
}

impl Args {
    pub fn exec(self, ctx: &Context) -> Exit {
        let cluster = ctx.cluster()?;
        if cluster.file.local_dir.is_some() {
            bail!("{} is a local cluster (local up): its agents are already running here; deploy is for the hosts of a cluster file from `cluster init`", cluster.path.display());
        }
        let files = match self.command {
            DeployCommand::Start => payload()?,
            _ => Vec::new(),
        };
        let ssh = Ssh { args: &self.ssh };
        let rows: Vec<Row> = std::thread::scope(|s| {
            let handles: Vec<_> = cluster
                .file
                .nodes
                .iter()
                .map(|n| {
                    let (ssh, cluster, files) = (&ssh, &cluster, &files);
                    let cmd = &self.command;
                    s.spawn(move || {
                        let host = ssh.target(n);
                        let r = match cmd {
                            DeployCommand::Start => start(ssh, cluster, n, &host, files),
                            DeployCommand::Status => status(ssh, cluster, n, &host),
                            DeployCommand::Stop => stop(ssh, cluster, n, &host),
                        };
                        Row {
                            node: n.name.to_string(),
                            host,
                            ok: r.is_ok(),
                            detail: r.unwrap_or_else(|e| format!("{e:#}")),
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| Row {
                        node: "?".into(),
                        host: "?".into(),
                        ok: false,
                        detail: "internal error".into(),
                    })
                })
                .collect()
        });
        if self.json {
            output::print_json(&rows)?;
        } else {
            let mut t = Table::new(&["node", "host", "result", "detail"]);
            for r in &rows {
                t.row(vec![
                    r.node.clone(),
                    r.host.clone(),
                    if r.ok { "ok" } else { "FAILED" }.into(),
                    r.detail.clone(),
                ]);
            }
            output::print(t.render_in(crate::output::terminal_width()))?;
        }
        Ok(if rows.iter().all(|r| r.ok) {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

fn node_dir(ssh: &Ssh, n: &Node) -> String {
    format!("{}/{}", ssh.args.remote_dir.trim_end_matches('/'), n.name)
}

fn start(ssh: &Ssh, cluster: &Cluster, n: &Node, host: &str, files: &[PathBuf]) -> Result<String> {
    let dir = node_dir(ssh, n);
    let socket_dir = n
        .socket
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "/tmp".into());
    ssh.run(
        host,
        &format!(
            "mkdir -p {d} && chmod 700 {d} && mkdir -p {s} && chmod 700 {s} && if [ -f {d}/agent.pid ] && [ \"$(cat /proc/$(cat {d}/agent.pid)/comm 2>/dev/null)\" = throttle-agent ]; then echo \"an agent already runs in {dd} (pid $(cat {d}/agent.pid)): deploy stop first\" >&2; exit 3; fi",
            d = quote(&dir),
            dd = dir.replace(['"', '\\', '$', '`'], "_"),
            s = quote(&socket_dir)
        ),
        None,
    )?;
    let token = cluster.token_path();
    for (src, name, mode) in files
        .iter()
        .map(|f| {
            (
                f.as_path(),
                f.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .to_string(),
                "700",
            )
        })
        .chain(std::iter::once((
            token.as_path(),
            "token".to_string(),
            "600",
        )))
    {
        ssh.run(
            host,
            &format!(
                "umask 077 && cat > {d}/{n}.tmp && chmod {mode} {d}/{n}.tmp && mv -f {d}/{n}.tmp {d}/{n}",
                d = quote(&dir),
                n = quote(&name)
            ),
            Some(src),
        )
        .with_context(|| format!("copying {}", src.display()))?;
    }
    let args = super::cluster::agent_line(&cluster.file, n, "token");
    let line: Vec<String> = args[1..].iter().map(|a| quote(a)).collect();
    ssh.run(
        host,
        &format!(
            "cd {d} && (setsid ./throttle-agent {args} > agent.log 2>&1 < /dev/null & echo $! > agent.pid)",
            d = quote(&dir),
            args = line.join(" ")
        ),
        None,
    )?;
    let client = AgentClient::with_timeout(cluster, n, Duration::from_secs(2));
    let began = Instant::now();
    loop {
        match client.status() {
            Ok(s) => return Ok(format!("started; {} at {}", s.pct, n.control)),
            Err(e) if began.elapsed() > Duration::from_secs(15) => {
                let log = ssh
                    .run(host, &format!("tail -n 3 {}/agent.log", quote(&dir)), None)
                    .unwrap_or_default();
                bail!("started, but its control API does not answer: {e:#}; agent.log: {log}");
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

fn status(ssh: &Ssh, cluster: &Cluster, n: &Node, host: &str) -> Result<String> {
    let dir = node_dir(ssh, n);
    let pid = ssh.run(
        host,
        &format!(
            "p=$(cat {d}/agent.pid 2>/dev/null) && [ \"$(cat /proc/$p/comm 2>/dev/null)\" = throttle-agent ] && echo \"$p\" || echo none",
            d = quote(&dir)
        ),
        None,
    )?;
    if pid == "none" {
        bail!("no agent process (never started, or it exited: see {dir}/agent.log)");
    }
    let s = AgentClient::with_timeout(cluster, n, Duration::from_secs(3))
        .status()
        .map_err(|e| anyhow!("process {pid} runs, but the control API does not answer: {e:#}"))?;
    Ok(format!("pid {pid}; {} of {}", s.pct, cluster.file.capacity))
}

fn stop(ssh: &Ssh, _cluster: &Cluster, n: &Node, host: &str) -> Result<String> {
    let dir = node_dir(ssh, n);
    let out = ssh.run(
        host,
        &format!(
            "p=$(cat {d}/agent.pid 2>/dev/null) && [ \"$(cat /proc/$p/comm 2>/dev/null)\" = throttle-agent ] || {{ rm -f {d}/agent.pid; echo 'not running'; exit 0; }}; kill \"$p\" 2>/dev/null || {{ rm -f {d}/agent.pid; echo 'not running'; exit 0; }}; for i in $(seq 50); do kill -0 \"$p\" 2>/dev/null || {{ rm -f {d}/agent.pid; echo stopped; exit 0; }}; sleep 0.1; done; kill -9 \"$p\"; rm -f {d}/agent.pid; echo killed",
            d = quote(&dir)
        ),
        None,
    )?;
    let _ = std::io::stdout().flush();
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn quoting_survives_the_remote_shell() {
        assert_eq!(super::quote("a b"), "'a b'");
        assert_eq!(super::quote("it's"), r"'it'\''s'");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", super::quote("$(echo no) ' \" ;")))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "$(echo no) ' \" ;");
    }
}
