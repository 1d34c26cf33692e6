//! `throttle-agent`: run one node's agent. See `throttle-agent --help`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser};
use throttle_agent::agent::{self, AgentConfig};
use throttle_agent::api::Tls;
use throttle_agent::directory::NodeEntry;
use throttle_agent::launch::programs::ProgramPolicy;
use throttle_agent::link::Reloaded;
use throttle_agent::services::forward::ForwardSpec;
use throttle_agent::transport::pump::PumpOptions;
use throttle_proto::auth::Token;
use throttle_proto::{Name, Pct, Rate, Shape};

/// How the links are emulated (`--links`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Links {
    Proxy,
    Kernel,
}

/// The per-node agent of throttle: shapes this node's interconnect traffic to a
/// percentage of an emulated link and carries it between nodes.
///
/// Applications reach other nodes through it: ranks of a job via the local endpoint
/// (a Unix socket), any TCP program via forward rules. The controller (`throttle-ctl`)
/// steers it over the control API, authenticated with the token in --token-file.
#[derive(Parser, Debug)]
#[command(
    version,
    args_override_self = true,
    after_help = "Example:\n  throttle-agent --node n0 --control 127.0.0.1:7600 --data 10.0.0.1:7601 \\\n      --capacity 1Gbit --token-file /etc/throttle/token\n  throttle-agent --config /etc/throttle/agent.toml     the same as a file (keys: the flags\n                                                       without dashes, e.g. token_file)\n\nSettings come from the command line, then the environment (THROTTLE_NODE,\nTHROTTLE_TOKEN_FILE), then --config, then the defaults; --print-config shows the result.\nSIGHUP re-reads --config and applies capacity, pct and latency_us without a restart\n(during a run, once the run's lease ends or it releases the link).\nUnder systemd (Type=notify) the agent reports READY=1 once it listens.\n\nWhat a holder of the token can do (ARCHITECTURE.md, Threat model): set the shaping,\nadd forwards between this node's addresses and other nodes, and start the programs\nallowed here (by default only throttle's workloads) as this agent's user.\n\nLogs go to stderr; set RUST_LOG=debug for detail."
)]
struct Args {
    /// This node's name, as the cluster file calls it (letters, digits, `-`, `_`, `.`).
    #[arg(long, value_parser = parse_name, env = "THROTTLE_NODE")]
    node: Name,
    /// Address of the control API (HTTP, or HTTPS with --tls-cert). Bind it only where the
    /// controller can reach it.
    #[arg(long, default_value = "127.0.0.1:7600")]
    control: SocketAddr,
    /// Serve the control API over TLS with this PEM certificate (chain) [with --tls-key].
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Address of the data port other agents connect to (the emulated interconnect).
    #[arg(long, default_value = "127.0.0.1:7601")]
    data: SocketAddr,
    /// Unix socket where local ranks open streams and register [default: NODE.sock in a
    /// private directory: $XDG_RUNTIME_DIR/throttle, /run/throttle for root, or /tmp/throttle-UID].
    #[arg(long)]
    local_socket: Option<PathBuf>,
    /// Emulated link speed per direction, in payload bytes: 1Gbit, 10Gbit, 125MB, ...
    #[arg(long, default_value = "1Gbit")]
    capacity: Rate,
    /// Start at this percentage of the capacity, or `unlimited`.
    #[arg(long, default_value = "100")]
    pct: Pct,
    /// Added one-way latency at egress, microseconds.
    #[arg(long, default_value_t = 0)]
    latency_us: u64,
    /// File holding the cluster token (at least 16 characters).
    #[arg(long, env = "THROTTLE_TOKEN_FILE")]
    token_file: PathBuf,
    /// Another node of the cluster, NAME=DATA_ADDR (repeatable). The controller can also push these.
    #[arg(long = "peer", value_name = "NAME=ADDR", value_parser = parse_peer)]
    peers: Vec<NodeEntry>,
    /// Forward rule LISTEN=NODE:HOST:PORT (repeatable), e.g. 127.0.0.1:5201=n1:127.0.0.1:5201.
    #[arg(long = "forward", value_name = "RULE", value_parser = ForwardSpec::parse_cli)]
    forwards: Vec<ForwardSpec>,
    /// Copy with buffers instead of splice(2) (for comparison; slower).
    #[arg(long)]
    no_splice: bool,
    /// Seconds a stream waits for its destination rank to register.
    #[arg(long, default_value = "10", value_parser = seconds_up_to(3600.0))]
    register_timeout: Duration,
    /// How far behind its schedule a backlogged stream may catch up, ms: an agent
    /// descheduled for up to this long loses none of the link's rate. Only data that was
    /// already waiting gets it; a message after a quiet phase always pays its full
    /// serialization time. (Was --burst-ms.)
    #[arg(long, alias = "burst-ms", default_value = "10", value_parser = catch_up_ms)]
    catch_up_ms: Duration,
    /// Worker threads of the agent [default: the number of CPUs]. On a local cluster with
    /// several agents per machine, 1 avoids cross-thread wake-ups (lower latency).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// Also allow launching this program (repeatable). By default only throttle's
    /// workloads installed next to this binary (throttle-bfs, throttle-pmm, throttle-mw,
    /// throttle-loggps, throttle-selftest) may be launched; the agent and throttle-ctl never are.
    #[arg(long = "allow-program", value_name = "PATH")]
    allow_programs: Vec<PathBuf>,
    /// Also allow launching every program in this directory (repeatable). A directory that
    /// holds a shell or an interpreter gives every token holder a shell as this user.
    #[arg(long = "allow-dir", value_name = "DIR")]
    allow_dirs: Vec<PathBuf>,
    /// Allow no program at all (the node only shapes traffic).
    #[arg(long, conflicts_with_all = ["allow_programs", "allow_dirs"])]
    no_programs: bool,
    /// Intercept programs' TCP connections to the other nodes' addresses (nftables
    /// redirect into this agent, delivered on the other side from the original source).
    /// Needs root (CAP_NET_ADMIN), `nft` and `ip`, and --data on this node's own address.
    /// The rules are removed when the agent stops and replaced when it starts again.
    #[arg(long)]
    intercept: bool,
    /// The addresses whose nodes interception may capture (ADDRESS/PREFIX, repeatable;
    /// default: the node's own subnet, /24 of its --data address). A node a token holder
    /// adds to the directory outside them is never intercepted, whatever agent answers
    /// there.
    #[arg(long = "intercept-within", value_name = "CIDR")]
    intercept_within: Vec<throttle_agent::state::interception::Subnet>,
    /// Let forwards reach this node's services bound to loopback only (127.0.0.1, ::1,
    /// other than this agent's own address) and ports under 1024, and listen on ports under
    /// 1024. Off, a token holder cannot expose a service meant for this machine only (a
    /// database on 127.0.0.1, sshd) to everyone who can reach a forward's listener.
    #[arg(long)]
    open_forwards: bool,
    /// Serve the preload library (LD_PRELOAD=libthrottle_preload.so in the programs) on
    /// 127.0.0.1 and ::1 at --preload-port (with a loopback --data, on that address: a
    /// node of a loopback cluster): programs' connections to the other nodes go through
    /// the agents without root or kernel rules. Needs --data on this node's own address.
    /// Serves only programs of the agent's own user (any user when run as root).
    #[arg(long)]
    preload: bool,
    /// The preload port (the library's THROTTLE_PRELOAD_AGENT must name the same; 0:
    /// any free port, written to the ready file).
    #[arg(long, default_value_t = throttle_proto::preload::DEFAULT_PORT, requires = "preload")]
    preload_port: u16,
    /// How the links are emulated for the preload library's programs. `proxy`: every
    /// connection between nodes is carried by the agents, which pace its bytes (added
    /// latency works; each message pays the agents' hop). `kernel`: the programs'
    /// sockets connect to their peers directly and Linux paces each at its max-min share
    /// of its node's egress and its peer's ingress, which the agents agree on (no byte of
    /// the program passes an agent; no added latency). Needs --preload.
    #[arg(long, value_enum, default_value_t = Links::Proxy, requires = "preload")]
    links: Links,
    /// With --links kernel on a host of the node's own (a namespace host's eth0; root):
    /// give this device an egress queue that holds every paced socket's packets to the
    /// link's rate, so that a message's first segment burst does not leave at once
    /// (`tc -s qdisc show dev DEV` shows it; removed when the agent stops). Replaces the
    /// device's root qdisc.
    #[arg(long, value_name = "DEV", requires = "links")]
    egress_device: Option<String>,
    /// Write the bound addresses as JSON to this file once listening (for launchers).
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Run the agent on these CPUs only (e.g. 0-1): on a local cluster, away from the
    /// cores its ranks use (`throttle-ctl local up --pin` sets both).
    #[arg(long, value_name = "LIST")]
    cpus: Option<throttle_proto::cpus::CpuList>,
    /// Run every launched rank on these CPUs only (e.g. 2-15).
    #[arg(long, value_name = "LIST")]
    rank_cpus: Option<throttle_proto::cpus::CpuList>,
    /// Scheduling priority of the agent: `high` (nice -10) keeps ranks that busy-poll on
    /// the same cores from starving it (a starved agent delivers less than the setting,
    /// and every run says so); `realtime` (SCHED_RR) is stronger still; `normal` asks for
    /// nothing. Raising needs root or CAP_SYS_NICE (or the RLIMIT_RTPRIO/RLIMIT_NICE an
    /// administrator grants); an agent refused falls back to the next one down
    /// (`realtime`, `high`, `normal`), logs a warning, and its status says how it runs.
    /// Ranks it launches always run at normal priority.
    #[arg(long, value_enum, default_value = "high")]
    priority: throttle_agent::launch::affinity::Priority,
    /// Read settings from this TOML file (keys: the flags without dashes, `-` as `_`).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the effective settings as a config file and exit.
    #[arg(long)]
    print_config: bool,
}

/// The flags with the config file's settings before them (see `config_file`).
fn parse_args(argv: Vec<std::ffi::OsString>) -> Result<Args, String> {
    let argv = throttle_agent::config_file::expand(&Args::command(), argv)?;
    let m = Args::command()
        .try_get_matches_from(argv)
        .map_err(|e| e.render().to_string())?;
    Args::from_arg_matches(&m).map_err(|e| e.render().to_string())
}

fn parse_name(text: &str) -> Result<Name, String> {
    Name::parse("node name", text).map_err(|e| e.to_string())
}

/// `--peer NAME=IP:PORT`.
fn parse_peer(text: &str) -> Result<NodeEntry, String> {
    let (name, data) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` must be NAME=IP:PORT"))?;
    Ok(NodeEntry {
        name: parse_name(name)?,
        data: data
            .parse::<SocketAddr>()
            .map_err(|_| format!("`{data}` is not IP:PORT"))?,
    })
}

/// Seconds, more than 0 and at most `max`.
fn seconds_up_to(max: f64) -> impl Fn(&str) -> Result<Duration, String> + Clone {
    move |text| {
        text.parse::<f64>()
            .ok()
            .filter(|s| *s > 0.0 && *s <= max)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("give seconds more than 0 and at most {max}, not `{text}`"))
    }
}

/// Milliseconds from 0.1 to 1000.
fn catch_up_ms(text: &str) -> Result<Duration, String> {
    text.parse::<f64>()
        .ok()
        .filter(|ms| (0.1..=1000.0).contains(ms))
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .ok_or_else(|| format!("give milliseconds from 0.1 to 1000, not `{text}`"))
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("throttle-agent: {msg}");
    std::process::exit(2)
}

fn main() {
    logging();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let expanded = throttle_agent::config_file::expand(&Args::command(), argv.clone())
        .unwrap_or_else(|e| fail(e));
    let matches = Args::command()
        .try_get_matches_from(expanded)
        .unwrap_or_else(|e| e.exit());
    let args = Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if args.print_config {
        // Not print!: a closed pipe (`| head`) is not a panic.
        let text = throttle_agent::config_file::print(&Args::command(), &matches);
        let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
        return;
    }
    raise_fd_limit();
    let config = config_of(&args).unwrap_or_else(|e| fail(e));
    place_this_thread(&args);
    let threads = args.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        usize::from,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start the runtime: {e}")));
    runtime.block_on(serve(config, args.ready_file.as_deref(), &argv));
}

/// Logs to stderr, at `RUST_LOG` (default info); colour codes only on a terminal.
fn logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// The agent's configuration from its settings: the token read, the programs it may
/// launch, TLS loaded; warnings logged.
fn config_of(args: &Args) -> Result<AgentConfig, String> {
    let token = Token::load(&args.token_file).map_err(|e| e.to_string())?;
    if let Some(w) = throttle_proto::os::token_file::permission_warning(&args.token_file) {
        tracing::warn!("{w}");
    }
    let shape = Shape::new(args.pct, args.capacity, args.latency_us).map_err(|e| e.to_string())?;
    let local_socket = match &args.local_socket {
        Some(p) => p.clone(),
        None => {
            let home = throttle_agent::launch::private_dir::default_home();
            throttle_agent::launch::private_dir::ensure(&home).map_err(|e| format!("{e:#}"))?;
            home.join(format!("{}.sock", args.node))
        }
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(c), Some(k)) => Some(Tls::load(c, k).map_err(|e| format!("{e:#}"))?),
        _ => None,
    };
    if tls.is_none() && !args.control.ip().is_loopback() {
        tracing::warn!(control = %args.control, "the control API is plain HTTP on a non-loopback address: the token crosses the network in clear; use --tls-cert/--tls-key, or a management network");
    }
    Ok(AgentConfig {
        node: args.node.clone(),
        control: args.control,
        data: args.data,
        local_socket,
        shape,
        token,
        peers: args.peers.clone(),
        forwards: args.forwards.clone(),
        pump: PumpOptions {
            splice: !args.no_splice && cfg!(target_os = "linux"),
            ..PumpOptions::default()
        },
        register_timeout: args.register_timeout,
        catch_up: args.catch_up_ms,
        programs: programs_of(args)?,
        tls,
        intercept: args.intercept,
        open_forwards: args.open_forwards,
        preload_port: args.preload.then_some(args.preload_port),
        kernel_links: args.links == Links::Kernel,
        egress_device: args.egress_device.clone(),
        intercept_within: args.intercept_within.clone(),
        // Read before the agent pins itself: the ranks' CPUs are outside its own set.
        rank_cpus: match &args.rank_cpus {
            Some(c) => Some(
                throttle_agent::launch::affinity::cpu_set(c)
                    .map_err(|e| format!("--rank-cpus: {e:#}"))?,
            ),
            None => None,
        },
    })
}

/// The programs a token holder may launch here (logged, with their warnings).
fn programs_of(args: &Args) -> Result<ProgramPolicy, String> {
    let mut programs = if args.no_programs {
        ProgramPolicy::nothing()
    } else {
        let here = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.to_path_buf()))
            .unwrap_or_else(|| PathBuf::from("."));
        ProgramPolicy::workloads_in(&here)
    };
    for p in &args.allow_programs {
        programs.allow_program(p).map_err(|e| e.to_string())?;
    }
    for d in &args.allow_dirs {
        programs.allow_dir(d).map_err(|e| e.to_string())?;
    }
    for w in programs.warnings() {
        tracing::warn!("{w}");
    }
    tracing::info!(programs = %programs.describe(), "programs that may be launched");
    Ok(programs)
}

/// Pin and raise this thread before the runtime starts: its worker threads inherit both.
/// A refused priority is a warning (the agent works, and says what it risks).
fn place_this_thread(args: &Args) {
    if let Some(cpus) = &args.cpus {
        throttle_agent::launch::affinity::pin_this_thread(cpus)
            .unwrap_or_else(|e| fail(format!("--cpus: {e:#}")));
    }
    use throttle_agent::launch::affinity::{raise_this_thread, Priority};
    if let (at, Some(refused)) = raise_this_thread(args.priority) {
        let risk = if at == Priority::Normal {
            "; other processes on this node's cores can keep the agent from its CPU (runs then are flagged): run it as root, or give it CAP_SYS_NICE (`sudo setcap cap_sys_nice+ep` on the throttle-agent binary)"
        } else {
            ""
        };
        tracing::warn!(
            "{refused}; running at {} priority instead{risk}",
            format!("{at:?}").to_lowercase()
        );
    }
}

/// Start the agent, say it is ready (the ready file, systemd), serve until SIGTERM or
/// Ctrl-C (SIGHUP reloads), then stop.
async fn serve(
    config: AgentConfig,
    ready_file: Option<&std::path::Path>,
    argv: &[std::ffi::OsString],
) {
    let running = agent::start(config)
        .await
        .unwrap_or_else(|e| fail(format!("{e:#}")));
    if let Some(path) = ready_file {
        let ready = serde_json::json!({
            "node": running.state.node,
            "control": running.control_addr.to_string(),
            "data": running.data_addr.to_string(),
            "preload": running.preload_addr.map(|a| a.to_string()),
            "local_socket": running.local_socket,
            "pid": std::process::id(),
        });
        let tmp = path.with_extension("tmp");
        let written =
            std::fs::write(&tmp, ready.to_string()).and_then(|_| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            fail(format!(
                "cannot write the ready file {}: {e}",
                path.display()
            ));
        }
    }
    match throttle_agent::notify::notify("READY=1") {
        Ok(true) => tracing::info!("told systemd READY=1"),
        Ok(false) => {}
        Err(e) => tracing::warn!("cannot notify systemd (NOTIFY_SOCKET): {e}"),
    }
    wait_for_signal(|| reload(argv, &running.state)).await;
    tracing::info!("stopping");
    let _ = throttle_agent::notify::notify("STOPPING=1");
    running.shutdown().await;
}

/// Wait for SIGTERM or Ctrl-C; on every SIGHUP call `on_hup` and go on waiting.
async fn wait_for_signal(on_hup: impl Fn()) {
    use tokio::signal::unix::{signal, SignalKind};
    let watch = |kind: SignalKind, name: &str| {
        signal(kind).unwrap_or_else(|e| fail(format!("cannot watch {name}: {e}")))
    };
    let mut term = watch(SignalKind::terminate(), "SIGTERM");
    let mut hup = watch(SignalKind::hangup(), "SIGHUP");
    loop {
        tokio::select! {
            _ = term.recv() => return,
            _ = tokio::signal::ctrl_c() => return,
            _ = hup.recv() => on_hup(),
        }
    }
}

/// SIGHUP: read the settings again (command line, environment, --config) and apply the
/// link's shape; anything else needs a restart. A file that no longer parses changes
/// nothing and says why.
fn reload(argv: &[std::ffi::OsString], agent: &throttle_agent::state::Agent) {
    let _ = throttle_agent::notify::notify("RELOADING=1");
    match parse_args(argv.to_vec())
        .and_then(|a| Shape::new(a.pct, a.capacity, a.latency_us).map_err(|e| e.to_string()))
    {
        Ok(shape) => match agent.link.reload(shape) {
            Reloaded::Now { was } => {
                tracing::info!(pct = %shape.pct(), capacity = %shape.capacity(), latency_us = shape.latency_us(), was = %was.pct(), "SIGHUP: shape reloaded");
            }
            Reloaded::WhenTheLeaseEnds { left } => {
                tracing::info!(pct = %shape.pct(), capacity = %shape.capacity(), latency_us = shape.latency_us(), lease_left_s = left.as_secs_f64(), "SIGHUP: shape reloaded; a run holds the link until its lease ends or it releases it, then this shape applies");
            }
        },
        Err(e) => tracing::warn!("SIGHUP: settings not reloaded, the running ones stay: {e}"),
    }
    let _ = throttle_agent::notify::notify("READY=1");
}

/// Many streams need many descriptors (a socket pair and a pipe pair per direction).
fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}
