//! A local emulated cluster: N agents on this machine, each on its own loopback address
//! (`throttle-ctl local up/down`).
//!
//! `local up` generates the token, starts the agents (detached, logging to the state
//! directory), waits until each has written its ready file, gives every agent the
//! directory of the others, and writes the cluster file. `local down` stops exactly the
//! agents it started (checked by pid, owner and executable) and removes the state
//! directory only when `up` made it (its marker file, the caller's own, in a directory
//! only the caller may enter): a cluster file is a file someone may hand over, and its
//! `local_dir` and `pid` entries name what `down` deletes and kills.
//!
//! With `--netns` each node is a network namespace on a bridge ([`crate::cluster::netns`]) with
//! its own 198.18.x.y address, and each agent runs inside its node's namespace with
//! interception on (the kernel redirect, or the preload port with `--intercept preload`),
//! so unmodified programs can be throttled. On the loopback cluster (one network stack
//! for every node) each agent serves the preload library on its own address, and
//! `throttle-ctl exec` runs a program as a node with the library loaded.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use throttle_proto::{Name, Rate};

use crate::cluster::agent_client::AgentClient;
use crate::cluster::{Cluster, ClusterFile, NamespaceHosts, Node};

/// What `local up` was asked for.
#[derive(Clone, Debug)]
pub struct LocalUp {
    pub nodes: usize,
    pub capacity: Rate,
    /// First loopback address; node i gets the i-th address after it.
    pub base_addr: std::net::Ipv4Addr,
    /// State directory (token, sockets, logs).
    pub dir: PathBuf,
    /// The agents' scheduling priority (`throttle-agent --priority`: `realtime`, `high`
    /// or `normal`); `up` says so when an agent could not obtain it.
    pub priority: String,
    /// Extra flags for every agent.
    pub agent_args: Vec<String>,
    /// `--pin`: the ranks' CPUs, written to the cluster file for `exec`.
    pub rank_cpus: Option<throttle_proto::cpus::CpuList>,
    /// Serve every agent's control API over TLS with certificates from a fresh cluster CA.
    pub tls: bool,
    /// Namespace hosts (root): `Some(subnet)`, `None` for a loopback cluster; the subnet
    /// itself may be left to be chosen (`Some(None)`).
    pub netns: Option<Option<std::net::Ipv4Addr>>,
    /// How namespace hosts' agents intercept programs' connections.
    pub intercept: crate::intercept::Mode,
    /// Kernel-paced links (`--links kernel`): the agents pace the programs' own sockets;
    /// namespace hosts' links get small segment bursts
    /// ([`crate::cluster::netns::KERNEL_PACED_GSO`]) and an egress queue at the link's
    /// rate (the agents' `--egress-device eth0`).
    pub kernel_links: bool,
}

/// `local up --pin`: the agents' CPUs (the first quarter of those this process may use,
/// at least one) and the ranks' (the rest).
pub fn pinning() -> Result<(throttle_proto::cpus::CpuList, throttle_proto::cpus::CpuList)> {
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .map_err(|e| anyhow::anyhow!("cannot read this process's CPU affinity: {e}"))?;
    let usable: Vec<usize> = (0..nix::sched::CpuSet::count())
        .filter(|&c| allowed.is_set(c).unwrap_or(false))
        .collect();
    split_cpus(&usable)
}

/// The agent flags of `--pin` and the ranks' CPUs (and says on stderr what goes where).
pub fn pin_args() -> Result<(Vec<String>, throttle_proto::cpus::CpuList)> {
    let (agents, ranks) = pinning()?;
    crate::note!("pinning agents to CPUs {agents}, ranks (and the processes of `throttle-ctl exec`) to CPUs {ranks}");
    Ok((
        vec![
            "--cpus".into(),
            agents.to_string(),
            "--rank-cpus".into(),
            ranks.to_string(),
        ],
        ranks,
    ))
}

fn split_cpus(
    usable: &[usize],
) -> Result<(throttle_proto::cpus::CpuList, throttle_proto::cpus::CpuList)> {
    use throttle_proto::cpus::CpuList;
    if usable.len() < 2 {
        bail!(
            "--pin needs at least 2 CPUs (one for the agents, one for the ranks); this process may use {}",
            usable.len()
        );
    }
    let agents = (usable.len() / 4).max(1);
    match (
        CpuList::from_sorted(&usable[..agents]),
        CpuList::from_sorted(&usable[agents..]),
    ) {
        (Some(a), Some(r)) => Ok((a, r)),
        _ => bail!("cannot split CPUs {usable:?} between agents and ranks"),
    }
}

/// The `throttle-agent` binary: `THROTTLE_AGENT_BIN`, else next to this executable, else PATH.
pub fn agent_binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("THROTTLE_AGENT_BIN") {
        return Ok(PathBuf::from(p));
    }
    if let Ok(me) = std::env::current_exe() {
        if let Some(dir) = me.parent() {
            for cand in [dir.join("throttle-agent"), dir.join("../throttle-agent")] {
                if cand.is_file() {
                    return Ok(cand);
                }
            }
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let cand = dir.join("throttle-agent");
            if cand.is_file() {
                return Ok(cand);
            }
        }
    }
    bail!("cannot find the `throttle-agent` binary next to throttle-ctl or on PATH; build it with `cargo build --workspace` or set THROTTLE_AGENT_BIN")
}

/// Whether `pid` is a running throttle agent of this user: its executable is named
/// `throttle-agent` (a command line can say anything) and the process is the caller's.
///
/// An agent given a capability (`setcap cap_sys_nice+ep`, what `local up` advises for
/// agents that cannot go first) is not dumpable: the kernel hides its `exe` link and
/// gives its `/proc` entries to root, even from its own user. Then its name is the one
/// it was started under (`comm`, set at exec from the file's name) and its owner the
/// real uid its `status` shows; `down` still asks that its command line names the
/// cluster's token file (`started_for`).
fn alive(pid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let agent = |n: &str| n == "throttle-agent" || n == "throttle-agent (deleted)";
    match std::fs::read_link(format!("/proc/{pid}/exe")) {
        Ok(exe) => {
            // A binary rebuilt under a running agent reads "throttle-agent (deleted)".
            let is_agent = exe.file_name().is_some_and(|n| agent(&n.to_string_lossy()));
            let mine = std::fs::metadata(format!("/proc/{pid}")).is_ok_and(|m| m.uid() == me);
            is_agent && mine
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let real_uid = std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("Uid:"))
                        .and_then(|u| u.split_whitespace().next()?.parse::<u32>().ok())
                });
            agent(comm.trim()) && real_uid == Some(me)
        }
        Err(_) => false,
    }
}

/// The file `local up` leaves in the state directory it made, which `local down` must
/// find (the caller's own, in a directory only the caller may enter) before it removes
/// that directory.
const MARKER: &str = ".throttle-local-state";

/// Whether `dir` is a state directory `local up` made for this user.
fn made_by_up(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let private = std::fs::symlink_metadata(dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == me && m.mode() & 0o077 == 0);
    let marked =
        std::fs::symlink_metadata(dir.join(MARKER)).is_ok_and(|m| m.is_file() && m.uid() == me);
    private && marked
}

/// The marker's line naming the cluster file the state belongs to.
const CLUSTER_LINE: &str = "cluster file: ";

/// `path` made absolute (against the working directory) without resolving links.
fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

/// Whether `dir` is a state directory `local up` made for the cluster file at
/// `cluster_path` (its marker, the caller's own in a private directory, names that file).
fn made_for(dir: &Path, cluster_path: &Path) -> bool {
    if !made_by_up(dir) {
        return false;
    }
    let Ok(state) = crate::shared_dir::Dir::open_shared(dir) else {
        return false;
    };
    let mut text = String::new();
    let read = state
        .open_own(MARKER)
        .is_ok_and(|mut f| std::io::Read::read_to_string(&mut f, &mut text).is_ok());
    let want = absolute(cluster_path);
    read && text
        .lines()
        .filter_map(|l| l.strip_prefix(CLUSTER_LINE))
        .any(|named| Path::new(named) == want)
}

/// The state directory at `path`, made if missing (its parents too): private (0700) and
/// this user's, in a directory nobody else may replace it in.
fn state_dir(path: &Path) -> Result<crate::shared_dir::Dir> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow!("--dir {} names no directory", path.display()))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let parent = crate::shared_dir::Dir::make_shared(&parent)
        .map_err(|e| anyhow!("the state directory's parent: {e:#}"))?;
    parent
        .private_subdir(name)
        .map_err(|e| anyhow!("--dir: {e:#}"))
}

/// Whether the agent `pid` was started for the state directory `dir` (its token file
/// there), as `local up` starts them: a hand-written cluster file may name any pid.
fn started_for(pid: u32, dir: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let token = dir.join("token");
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    args.windows(2).any(|w| {
        use std::os::unix::ffi::OsStrExt;
        w[0] == b"--token-file" && Path::new(std::ffi::OsStr::from_bytes(w[1])) == token
    })
}

/// Start the cluster and write the cluster file at `cluster_path`.
pub fn up(req: &LocalUp, cluster_path: &Path) -> Result<Cluster> {
    if req.nodes == 0 || req.nodes > 250 {
        bail!("--nodes must be between 1 and 250 (got {})", req.nodes);
    }
    if let Ok(existing) = Cluster::load(cluster_path) {
        if existing
            .file
            .nodes
            .iter()
            .any(|n| n.pid.map(alive).unwrap_or(false))
        {
            bail!(
                "a local cluster is already up (cluster file {}); run `throttle-ctl local down` first",
                cluster_path.display()
            );
        }
    }
    let agent = agent_binary()?;
    if req.netns.is_some() {
        crate::cluster::netns::check_prerequisites()?;
    }
    let dir = prepare_state(&req.dir, cluster_path)?;
    let token_path = dir.join("token");
    crate::cluster::write_new_token(&token_path)?;
    let base = u32::from(req.base_addr);
    let ca = if req.tls {
        Some(crate::cluster::certs::ClusterCa::create(&dir)?)
    } else {
        None
    };
    let layout = match req.netns {
        Some(subnet) => Some(crate::cluster::netns::Layout {
            tag: crate::cluster::netns::tag_for(&dir),
            subnet: match subnet {
                Some(s) => s,
                None => crate::cluster::netns::free_subnet()?,
            },
            nodes: req.nodes,
        }),
        None => None,
    };
    let mut file = ClusterFile {
        token_file: token_path.clone(),
        capacity: req.capacity,
        local_dir: Some(dir.clone()),
        tls_ca: ca.as_ref().map(|(_, path)| path.clone()),
        namespaces: layout.as_ref().map(|l| NamespaceHosts {
            tag: l.tag.clone(),
            subnet: l.subnet,
            host_address: l.host_addr(),
            nodes: l.nodes,
            intercept: req.intercept,
        }),
        rank_cpus: req.rank_cpus.clone(),
        nodes: Vec::new(),
    };
    // Written before anything is made: if this process dies half-way, `local down` finds
    // the state directory and the namespaces to remove.
    file.write(cluster_path)?;
    let made = (|| -> Result<Vec<Node>> {
        if let Some(l) = &layout {
            crate::cluster::netns::create(
                l,
                req.kernel_links
                    .then_some(crate::cluster::netns::KERNEL_PACED_GSO),
            )?;
        }
        start_agents(req, &agent, &dir, &token_path, &ca, base, layout.as_ref())
    })();
    let ready = made.and_then(|nodes| {
        file.nodes = nodes;
        file.write(cluster_path)?;
        let cluster = Cluster::load(cluster_path)?;
        crate::cluster::directory::push(&cluster)?;
        if let Some(note) = priority_note(&cluster, &req.priority) {
            crate::note!("{note}");
        }
        Ok(cluster)
    });
    if ready.is_err() {
        // Leave nothing behind: agents, namespaces, the state directory, the cluster file.
        let _ = down(cluster_path);
    }
    ready
}

/// What to say when some agents did not obtain the priority asked for (`wanted`: their
/// status says how each is scheduled): on a busy machine an agent that is not ahead of
/// the other processes waits for a CPU, its links deliver late and runs are flagged
/// (measured: with a busy loop beside the demo, agents at nice -10 waited 1.6-1.8% of a
/// run for a CPU by the median, 6-7% at the 90th percentile, under SCHED_RR 0.1% and
/// 0.4%; experiments/2026-11-28-calibrated-intervals.md).
fn priority_note(cluster: &Cluster, wanted: &str) -> Option<String> {
    let short = |s: &throttle_proto::status::Status| match wanted {
        "realtime" => s.cpu.realtime == Some(false),
        "high" => s.cpu.raised() == Some(false),
        _ => false,
    };
    let low = cluster
        .file
        .nodes
        .iter()
        .filter(|n| {
            crate::cluster::agent_client::AgentClient::new(cluster, n)
                .status()
                .is_ok_and(|s| short(&s))
        })
        .count();
    (low > 0).then(|| {
        format!(
            "note: {} of {} agents could not run at {wanted} priority (it needs root or CAP_SYS_NICE) and fell back to a lower one: on a busy machine they wait for a CPU and runs are flagged; to let them go first, run as root or give the agent the capability: sudo setcap cap_sys_nice+ep {}",
            low,
            cluster.file.nodes.len(),
            agent_binary().map_or_else(|_| "throttle-agent".into(), |p| p.display().to_string())
        )
    })
}

/// The state directory `up` keeps the token, logs and sockets in, made private and
/// marked as `up`'s for `cluster_path`; its canonical path.
fn prepare_state(state_path: &Path, cluster_path: &Path) -> Result<PathBuf> {
    // `local down` removes the state directory, and the token and sockets go in it: it
    // must be one `up` makes, or an empty private one of this user's, never a directory
    // with someone's files in it, nor a link to one, nor another user's (who could read
    // the token, or answer for the agents through a ready file).
    let state = state_dir(state_path)?;
    let holds_files = !state.is_empty()?;
    if holds_files && !made_by_up(state_path) {
        bail!(
            "--dir {} exists and holds files; `local up` keeps its state (token, logs, sockets) in a directory of its own, which `local down` removes: name a new or empty one (a state directory left by an older throttle has no marker: remove it by hand)",
            state_path.display()
        );
    }
    // Token, certificates' keys, sockets and the ranks' run directories live here: the
    // directory checked above is private (0700, this user's), its parent lets no one else
    // replace it.
    state.make_private()?;
    let dir = state_path.canonicalize()?;
    {
        use std::io::Write;
        // The marker names the cluster file this state belongs to: `local down` acts only
        // for that file (a hand-written one naming this directory is not it).
        let mut marker = state.replace(MARKER, 0o600)?;
        writeln!(
            marker,
            "made by `throttle-ctl local up`; `throttle-ctl local down` removes this directory\n{CLUSTER_LINE}{}",
            absolute(cluster_path).display()
        )
        .with_context(|| format!("cannot write {}", dir.join(MARKER).display()))?;
    }
    Ok(dir)
}

/// Start one agent per node (inside its namespace for namespace hosts) and wait until
/// each is ready; kills those started when anything fails.
fn start_agents(
    req: &LocalUp,
    agent: &Path,
    dir: &Path,
    token_path: &Path,
    ca: &Option<(crate::cluster::certs::ClusterCa, PathBuf)>,
    base: u32,
    layout: Option<&crate::cluster::netns::Layout>,
) -> Result<Vec<Node>> {
    let launch = AgentLaunch {
        req,
        agent,
        dir,
        token_path,
        ca,
        base,
        layout,
    };
    let mut children: Vec<Starting> = Vec::new();
    let nodes = spawn_all(&launch, &mut children).and_then(|()| ready_nodes(dir, &mut children));
    if nodes.is_err() {
        // Whatever failed, no agent started for this cluster is left running.
        kill_all(&mut children);
    }
    nodes
}

/// Start every node's agent, each recorded in `children` as soon as it runs.
fn spawn_all(launch: &AgentLaunch<'_>, children: &mut Vec<Starting>) -> Result<()> {
    for i in 0..launch.req.nodes {
        let site = launch.site(i)?;
        let name = &site.name;
        let ready = launch.dir.join(format!("{name}.ready"));
        let _ = std::fs::remove_file(&ready);
        let log = std::fs::File::create(launch.dir.join(format!("{name}.log")))?;
        let mut cmd = launch.command(&site, &ready, log)?;
        // The command line, for `local restart` (the ports are the ones it got then).
        let argv: Vec<String> = std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        std::fs::write(
            launch.dir.join(format!("{name}.command.json")),
            serde_json::to_string(&argv)?,
        )?;
        let child = cmd
            .spawn()
            .map_err(|e| anyhow!("cannot start {}: {e}", launch.agent.display()))?;
        let AgentSite {
            name, addr, netns, ..
        } = site;
        children.push((name, child, ready, netns.map(|ns| (ns, addr))));
    }
    Ok(())
}

/// Wait for each started agent's ready file; the nodes, in order.
fn ready_nodes(dir: &Path, children: &mut [Starting]) -> Result<Vec<Node>> {
    let mut nodes = Vec::new();
    for (name, child, ready, netns) in children.iter_mut() {
        if let Some(f) = wait_ready(dir, name, child, ready) {
            bail!(f);
        }
        let ready: Ready = std::fs::read_to_string(&*ready)
            .map_err(anyhow::Error::from)
            .and_then(|t| serde_json::from_str(&t).map_err(anyhow::Error::from))
            .map_err(|e| anyhow!("agent {name} wrote an unreadable ready file: {e}"))?;
        nodes.push(Node {
            name: name.clone(),
            control: ready.control,
            data: ready.data,
            socket: ready.local_socket,
            pid: Some(child.id()),
            netns: netns.as_ref().map(|(ns, _)| ns.clone()),
            address: netns.as_ref().map(|(_, a)| std::net::IpAddr::V4(*a)),
            preload: ready.preload,
        });
    }
    Ok(nodes)
}

/// An agent started and not yet ready: node, process, ready file, namespace and address.
type Starting = (
    Name,
    std::process::Child,
    PathBuf,
    Option<(String, std::net::Ipv4Addr)>,
);

/// Kill the agents started so far, and wait for them.
fn kill_all(children: &mut [Starting]) {
    for (_, c, _, _) in children.iter_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// What every agent `local up` starts is started with ([`start_agents`]).
struct AgentLaunch<'a> {
    req: &'a LocalUp,
    agent: &'a Path,
    dir: &'a Path,
    token_path: &'a Path,
    ca: &'a Option<(crate::cluster::certs::ClusterCa, PathBuf)>,
    /// The first loopback address, as a number (loopback clusters).
    base: u32,
    layout: Option<&'a crate::cluster::netns::Layout>,
}

/// Where one node's agent runs: its name, address, control and data ports (0: any), and
/// namespace (namespace hosts).
struct AgentSite {
    name: Name,
    addr: std::net::Ipv4Addr,
    ports: (u16, u16),
    netns: Option<String>,
}

impl AgentLaunch<'_> {
    /// Where the agent of node `i` runs.
    fn site(&self, i: usize) -> Result<AgentSite> {
        let name = Name::parse("node name", &format!("n{i}")).map_err(|e| anyhow!("{e}"))?;
        let (addr, ports, netns) = match self.layout {
            // Fixed ports: every node has its own address, and people can remember them.
            Some(l) => (l.node_addr(i), (7600, 7601), Some(l.namespace(i))),
            None => (std::net::Ipv4Addr::from(self.base + i as u32), (0, 0), None),
        };
        Ok(AgentSite {
            name,
            addr,
            ports,
            netns,
        })
    }

    /// The command that starts the agent at `site` (in its own process group), writing
    /// `ready` once it serves and its log to `log`; a TLS certificate is issued for it
    /// with a cluster CA.
    fn command(&self, site: &AgentSite, ready: &Path, log: std::fs::File) -> Result<Command> {
        let (req, agent, dir, layout) = (self.req, self.agent, self.dir, self.layout);
        let AgentSite {
            name,
            addr,
            ports,
            netns,
        } = site;
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns])
                    .arg(agent)
                    .arg(req.intercept.agent_flag());
                // Only the cluster's own /24 is intercepted, whatever a token holder adds
                // to the directory.
                if let Some(l) = layout {
                    c.arg("--intercept-within").arg(format!("{}/24", l.subnet));
                }
                c
            }
            // A loopback cluster's agents serve the preload library, each on its own
            // address at a port of its choosing: `throttle-ctl exec NODE` runs a program
            // as that node, its connections to the others through the agents.
            None => {
                let mut c = Command::new(agent);
                c.args(["--preload", "--preload-port", "0"]);
                c
            }
        };
        cmd.args(["--node", name.as_str()])
            .args([
                "--control",
                &format!("{addr}:{}", ports.0),
                "--data",
                &format!("{addr}:{}", ports.1),
            ])
            .arg("--local-socket")
            .arg(dir.join(format!("{name}.sock")))
            .arg("--token-file")
            .arg(self.token_path)
            .args(["--capacity", &req.capacity.to_string().replace(' ', "")])
            .arg("--ready-file")
            .arg(ready)
            .args(["--priority", &req.priority])
            .args(&req.agent_args)
            .args(match (req.kernel_links, netns) {
                // A namespace host's own link gets the queue that holds the paced
                // sockets' bursts to the link's rate (the agent's --egress-device).
                (true, Some(_)) => &["--links", "kernel", "--egress-device", "eth0"][..],
                (true, None) => &["--links", "kernel"][..],
                (false, _) => &[],
            })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if let Some((ca, _)) = self.ca {
            let cert = ca.issue(dir, name, std::net::IpAddr::V4(*addr))?;
            cmd.arg("--tls-cert")
                .arg(&cert.cert)
                .arg("--tls-key")
                .arg(&cert.key);
        }
        {
            use std::os::unix::process::CommandExt;
            // Own process group: a Ctrl-C aimed at throttle-ctl leaves the agents running.
            cmd.process_group(0);
        }
        Ok(cmd)
    }
}

/// Wait until the agent of node `name` (`child`) writes its `ready` file; why it did not
/// (it exited, with its log's last lines, or 15 s passed), if it did not.
fn wait_ready(
    dir: &Path,
    name: &Name,
    child: &mut std::process::Child,
    ready: &Path,
) -> Option<String> {
    let start = Instant::now();
    while !ready.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
            return Some(format!(
                "agent {name} exited ({status}) before it was ready:\n{}",
                tail(&log, 10)
            ));
        }
        if start.elapsed() > Duration::from_secs(15) {
            return Some(format!(
                "agent {name} did not become ready within 15 s; see {}",
                dir.join(format!("{name}.log")).display()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// Start node `name`'s agent again, with the command line `local up` gave it and the
/// addresses it had (an agent killed or crashed; a running one is stopped first), then
/// give it the cluster's directory. Its log goes on in the same file.
pub fn restart(cluster_path: &Path, name: &str) -> Result<Node> {
    let mut cluster = Cluster::load(cluster_path)?;
    let Some(dir) = cluster.file.local_dir.clone() else {
        bail!(
            "{} describes a real cluster (no local_dir); `local restart` restarts agents of a local cluster (elsewhere: `deploy start`, or the agent line `cluster init` printed)",
            cluster_path.display()
        );
    };
    let node = cluster.node(name)?.clone();
    let saved = dir.join(format!("{}.command.json", node.name));
    let mut argv: Vec<String> = std::fs::read_to_string(&saved)
        .map_err(anyhow::Error::from)
        .and_then(|t| serde_json::from_str(&t).map_err(anyhow::Error::from))
        .map_err(|e| {
            anyhow!(
                "cannot read how node `{name}`'s agent was started ({}: {e}); `local down` and `local up` start every agent again",
                saved.display()
            )
        })?;
    if let Some(pid) = node.pid.filter(|p| alive(*p)) {
        let p = nix::unistd::Pid::from_raw(pid as i32);
        let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGTERM);
        let start = Instant::now();
        while alive(pid) && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive(pid) {
            let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGKILL);
        }
    }
    // The addresses it had, whatever ports it picked the first time.
    let mut keep = vec![
        ("--control", node.control.to_string()),
        ("--data", node.data.to_string()),
    ];
    if let Some(p) = node.preload {
        keep.push(("--preload-port", p.port().to_string()));
    }
    for (flag, value) in keep {
        if let Some(i) = argv.iter().position(|a| a == flag) {
            if let Some(v) = argv.get_mut(i + 1) {
                *v = value;
            }
        }
    }
    let ready = dir.join(format!("{}.ready", node.name));
    let _ = std::fs::remove_file(&ready);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{}.log", node.name)))?;
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| anyhow!("{} is empty", saved.display()))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| anyhow!("cannot start {program}: {e}"))?;
    let start = Instant::now();
    while !ready.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            let text =
                std::fs::read_to_string(dir.join(format!("{}.log", node.name))).unwrap_or_default();
            bail!(
                "agent {} exited ({status}) before it was ready:\n{}",
                node.name,
                tail(&text, 10)
            );
        }
        if start.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("agent {} did not become ready within 15 s", node.name);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = child.id();
    for n in cluster.file.nodes.iter_mut() {
        if n.name == node.name {
            n.pid = Some(pid);
        }
    }
    cluster.file.write(cluster_path)?;
    let cluster = Cluster::load(cluster_path)?;
    crate::cluster::directory::push(&cluster)?;
    Ok(cluster.node(name)?.clone())
}

/// What an agent writes to its ready file (`--ready-file`).
#[derive(serde::Deserialize)]
struct Ready {
    control: std::net::SocketAddr,
    data: std::net::SocketAddr,
    local_socket: PathBuf,
    /// The preload port (agents that serve the library).
    #[serde(default)]
    preload: Option<std::net::SocketAddr>,
}

/// Stop the agents of the local cluster and remove its state. Returns the nodes stopped;
/// `None` when there is no cluster file (nothing to do: running `down` twice is fine).
/// How `local down` treats what still runs on the nodes, and the agents' logs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Down {
    /// End the programs still running in the nodes (else `down` refuses while any run).
    pub force: bool,
    /// Keep the agents' logs: copied to `throttle-local-logs/` beside the cluster file.
    pub keep_logs: bool,
}

/// What still runs on the nodes besides their agents: a line per busy node ("n1: 2
/// processes (orted, mpitest)", "n0: 1 job"). On namespace hosts the processes in the
/// node's namespace; on a loopback cluster the jobs each agent says it runs.
fn still_running(file: &ClusterFile, cluster_path: &Path) -> Vec<String> {
    let mut busy = Vec::new();
    if let Some(ns) = &file.namespaces {
        if !crate::cluster::netns::is_tag(&ns.tag) {
            return busy;
        }
        let layout = crate::cluster::netns::Layout {
            tag: ns.tag.clone(),
            subnet: ns.subnet,
            nodes: ns.nodes,
        };
        for (i, n) in file.nodes.iter().enumerate() {
            let agent = n.pid.map(|p| p as i32);
            let others: Vec<String> = crate::cluster::netns::pids(&layout.namespace(i))
                .into_iter()
                .filter(|p| Some(*p) != agent)
                .map(|p| {
                    std::fs::read_to_string(format!("/proc/{p}/comm"))
                        .map(|c| c.trim().to_string())
                        .unwrap_or_else(|_| p.to_string())
                })
                .collect();
            if !others.is_empty() {
                busy.push(format!(
                    "{}: {} process(es) ({})",
                    n.name,
                    others.len(),
                    others.join(", ")
                ));
            }
        }
        return busy;
    }
    let Ok(cluster) = Cluster::load(cluster_path) else {
        return busy;
    };
    for n in &file.nodes {
        if !n.pid.is_some_and(alive) {
            continue;
        }
        if let Ok(s) = AgentClient::with_timeout(&cluster, n, Duration::from_secs(2)).status() {
            if s.running_jobs > 0 {
                busy.push(format!("{}: {} job(s)", n.name, s.running_jobs));
            }
        }
    }
    busy
}

pub fn down(cluster_path: &Path) -> Result<Option<Vec<String>>> {
    down_with(
        cluster_path,
        Down {
            force: true,
            keep_logs: false,
        },
    )
}

/// Stop the local cluster (see [`down`]); while programs still run on its nodes, refuse
/// unless `how.force`, which ends them first.
pub fn down_with(cluster_path: &Path, how: Down) -> Result<Option<Vec<String>>> {
    let Some(text) = crate::cluster::read_file(cluster_path)? else {
        return Ok(None);
    };
    let file: ClusterFile = toml::from_str(&text).map_err(|e| {
        anyhow!(
            "the cluster file {} is not valid: {e}",
            cluster_path.display()
        )
    })?;
    let Some(dir) = file.local_dir.clone() else {
        bail!(
            "{} describes a real cluster (no local_dir); `local down` only stops local clusters",
            cluster_path.display()
        );
    };
    // A cluster file is a file someone may hand over or write by hand: `down` stops agents
    // and removes a state directory only for the file `local up` wrote (the state
    // directory's marker names it).
    let ours = made_for(&dir, cluster_path);
    let busy = if ours {
        still_running(&file, cluster_path)
    } else {
        Vec::new()
    };
    if !busy.is_empty() {
        end_programs(&file, &busy, how.force)?;
    }
    if how.keep_logs && ours {
        // Logs not kept are no reason to leave the agents running.
        if let Err(e) = keep_logs(&file, &dir, cluster_path) {
            crate::note!("warning: the agents' logs are not kept: {e:#}");
        }
    } else if how.keep_logs {
        crate::note!(
            "not keeping logs from {}: `local up` did not make it for {}",
            dir.display(),
            cluster_path.display()
        );
    }
    let mut stopped = Vec::new();
    for n in &file.nodes {
        let Some(pid) = n.pid else { continue };
        if !ours || !alive(pid) || !started_for(pid, &dir) {
            continue;
        }
        stop_agent(pid);
        stopped.push(n.name.to_string());
    }
    if let Some(ns) = &file.namespaces {
        // `down` runs as root and kills what runs in these namespaces: only names this
        // tool makes.
        if !crate::cluster::netns::is_tag(&ns.tag) || ns.nodes > crate::cluster::netns::MAX_NODES {
            bail!(
                "{}: `namespaces` names tag `{}` and {} nodes, which `local up` never writes; remove them by hand",
                cluster_path.display(),
                ns.tag.escape_debug(),
                ns.nodes
            );
        }
        crate::cluster::netns::remove(&crate::cluster::netns::Layout {
            tag: ns.tag.clone(),
            subnet: ns.subnet,
            nodes: ns.nodes,
        });
    }
    if ours {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        crate::note!(
            "stopped nothing and left {}: `local up` did not make it for {} (no {MARKER} of yours naming this cluster file in a private directory)",
            dir.display(),
            cluster_path.display()
        );
    }
    std::fs::remove_file(cluster_path)?;
    Ok(Some(stopped))
}

/// Programs still run on the nodes (`busy` names them): refuse, or with `force` end
/// them first (on namespace hosts, everything in the namespaces but the agents).
fn end_programs(file: &ClusterFile, busy: &[String], force: bool) -> Result<()> {
    if !force {
        bail!(
            "programs still run on the cluster's nodes ({}): stopping the agents now would cut them off (an mpirun on this host then hangs); wait for them, or `throttle-ctl local down --force` to end them first",
            busy.join("; ")
        );
    }
    crate::note!("ending what still runs on the nodes: {}", busy.join("; "));
    if let Some(ns) = &file.namespaces {
        if crate::cluster::netns::is_tag(&ns.tag) {
            let layout = crate::cluster::netns::Layout {
                tag: ns.tag.clone(),
                subnet: ns.subnet,
                nodes: ns.nodes,
            };
            let agents: Vec<i32> = file
                .nodes
                .iter()
                .filter_map(|n| n.pid.map(|p| p as i32))
                .collect();
            crate::cluster::netns::end_programs(&layout, &agents);
        }
    }
    Ok(())
}

/// Stop an agent: SIGTERM, up to 5 s to go, then SIGKILL.
fn stop_agent(pid: u32) {
    let p = nix::unistd::Pid::from_raw(pid as i32);
    let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGTERM);
    let start = Instant::now();
    while alive(pid) && start.elapsed() < Duration::from_secs(5) {
        // Reap it if it is our child (it usually is not: `local up` ran earlier).
        let _ = nix::sys::wait::waitpid(p, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(pid) {
        let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGKILL);
    }
}

/// Copy the agents' logs from the state directory `dir` to `throttle-local-logs/` beside
/// the cluster file: created private, or an existing private one of this user's; each log
/// read without following a link, written new (one there before replaced, never written
/// through).
fn keep_logs(file: &ClusterFile, dir: &Path, cluster_path: &Path) -> Result<()> {
    let (beside, _) = crate::shared_dir::in_shared_dir(cluster_path)?;
    let keep = beside.private_subdir("throttle-local-logs")?;
    keep.make_private()?;
    let state = crate::shared_dir::Dir::open_shared(dir)?;
    for n in &file.nodes {
        let name = format!("{}.log", n.name);
        let Ok(mut from) = state.open_own(&name) else {
            continue;
        };
        let mut to = keep.replace(&name, 0o600)?;
        std::io::copy(&mut from, &mut to)
            .map_err(|e| anyhow!("cannot keep {}: {e}", dir.join(&name).display()))?;
    }
    crate::note!("the agents' logs are in {}", keep.path().display());
    Ok(())
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_gives_the_agents_a_quarter_and_the_ranks_the_rest() {
        let s = |v: &[usize]| {
            split_cpus(v)
                .map(|(a, r)| format!("{a} | {r}"))
                .unwrap_or_else(|e| e.to_string())
        };
        assert_eq!(s(&[0, 1]), "0 | 1");
        assert_eq!(s(&(0..16).collect::<Vec<_>>()), "0-3 | 4-15");
        assert_eq!(s(&[2, 3, 5, 7, 9]), "2 | 3,5,7,9");
        assert!(s(&[0]).contains("at least 2 CPUs"));
    }

    fn cluster_file(dir: &Path, local_dir: &Path, pid: u32) -> PathBuf {
        let path = dir.join("evil.toml");
        std::fs::write(
            &path,
            format!(
                "token_file = \"token\"\ncapacity = \"1 Gbit/s\"\nlocal_dir = \"{}\"\n[[node]]\nname = \"n0\"\ncontrol = \"127.0.70.1:1\"\ndata = \"127.0.70.1:2\"\nsocket = \"/tmp/n0.sock\"\npid = {pid}\n",
                local_dir.display()
            ),
        )
        .unwrap();
        path
    }

    #[test]
    fn down_removes_only_what_up_made_and_kills_only_agents() {
        let base = std::env::temp_dir().join(format!("throttle-down-{}", std::process::id()));
        let victim = base.join("victim");
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(victim.join("results.csv"), "precious").unwrap();
        // A process whose command line says throttle-agent, which it is not.
        let mut impostor = Command::new("bash")
            .args(["-c", "exec -a throttle-agent sleep 30"])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let path = cluster_file(&base, &victim, impostor.id());
        let stopped = down(&path).unwrap().unwrap();
        assert!(stopped.is_empty(), "{stopped:?}");
        assert!(
            impostor.try_wait().unwrap().is_none(),
            "the impostor was killed"
        );
        assert_eq!(
            std::fs::read(victim.join("results.csv")).unwrap(),
            b"precious"
        );
        assert!(!path.exists(), "the cluster file itself is gone");
        // `up` into a directory with files in it is refused before anything starts.
        let req = LocalUp {
            nodes: 2,
            capacity: "1Gbit".parse().unwrap(),
            base_addr: "127.0.70.1".parse().unwrap(),
            dir: victim.clone(),
            priority: "normal".into(),
            agent_args: vec![],
            rank_cpus: None,
            tls: false,
            netns: None,
            intercept: crate::intercept::Mode::Kernel,
            kernel_links: false,
        };
        let e = up(&req, &base.join("c.toml")).unwrap_err().to_string();
        assert!(e.contains("exists and holds files"), "{e}");
        assert_eq!(
            std::fs::read(victim.join("results.csv")).unwrap(),
            b"precious"
        );
        let _ = impostor.kill();
        let _ = impostor.wait();
        std::fs::remove_dir_all(&base).unwrap();
    }
}
