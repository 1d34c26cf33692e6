//! `throttle-ctl`: the controller CLI. Argument parsing and printing only; the work is in
//! the `throttle_ctl` library.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use throttle_agent::rate::Rate;
use throttle_ctl::cluster::{resolve_path, Cluster};
use throttle_ctl::commands::{calibrate, forward, run as run_cmd, set, status};
use throttle_ctl::local;

/// Throttle the interconnect of a (local or real) cluster and measure what programs need.
///
/// Every node runs a throttle-agent that shapes its traffic to a percentage of an emulated
/// link. throttle-ctl reads the cluster file (default ./throttle-cluster.toml, or --cluster
/// / THROTTLE_CLUSTER), sets bandwidths, runs workloads at stepped bandwidths and cluster
/// sizes, stores every run, and derives how much bandwidth a program needs and how that
/// grows with the cluster.
#[derive(Parser, Debug)]
#[command(
    version,
    after_help = "Start here:\n  throttle-ctl demo                                  the whole method on a local cluster\n  throttle-ctl local up --nodes 4 --capacity 1Gbit   a local cluster to work with\n  throttle-ctl set 50 && throttle-ctl status\n  throttle-ctl run --workload bfs --nodes 4 --bw 30\n  throttle-ctl local down"
)]
struct Cli {
    /// Cluster file [default: ./throttle-cluster.toml, or $THROTTLE_CLUSTER].
    #[arg(long, global = true)]
    cluster: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start or stop a local emulated cluster (agents on this machine's loopback addresses).
    #[command(subcommand)]
    Local(LocalCommand),
    /// Show every node's bandwidth setting, current rates and open streams.
    Status {
        /// Print JSON (one array, one object per node) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Throttle the link of every node (or one) to PCT % of its capacity.
    #[command(
        after_help = "Examples:\n  throttle-ctl set 30                  every node at 30% of its capacity\n  throttle-ctl set unlimited           shaping off\n  throttle-ctl set 100 --node n2 --latency-us 50"
    )]
    Set {
        /// Percentage from 0.01 to 100, or `unlimited`.
        pct: String,
        /// Only this node.
        #[arg(long)]
        node: Option<String>,
        /// Added one-way latency at egress, microseconds.
        #[arg(long)]
        latency_us: Option<u64>,
        /// Also change the link capacity (e.g. 10Gbit).
        #[arg(long)]
        capacity: Option<String>,
        /// Print the resulting status as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Shaped port forwards that carry any TCP program (iperf3, a database client) between nodes.
    #[command(subcommand)]
    Forward(ForwardCommand),
    /// Run one job (BFS, PMM or a program of your own) on the first N nodes at one bandwidth.
    #[command(
        after_help = "Examples:\n  throttle-ctl run --workload bfs --scale 16 --nodes 4 --ranks-per-node 1 --bw 50\n  throttle-ctl run --workload pmm --size 2048 --bcast pipelined --nodes 4 --bw 30 --json\n  throttle-ctl run --workload program --program my-mpi-like-app --nodes 2 --bw 100 -- --iterations 10"
    )]
    Run {
        /// bfs, pmm, or program (with --program).
        #[arg(long)]
        workload: String,
        /// Nodes to use (the first N of the cluster file).
        #[arg(long)]
        nodes: usize,
        #[arg(long, default_value_t = 1)]
        ranks_per_node: usize,
        /// Bandwidth in percent of the capacity, or `unlimited`.
        #[arg(long, default_value = "100")]
        bw: String,
        /// BFS: graph scale (2^SCALE vertices).
        #[arg(long, default_value_t = 16)]
        scale: u32,
        /// BFS: edges per vertex.
        #[arg(long, default_value_t = 16)]
        edge_factor: u32,
        /// BFS: number of search keys.
        #[arg(long, default_value_t = 64)]
        keys: usize,
        /// BFS: skip validation (faster sweeps).
        #[arg(long)]
        no_validate: bool,
        /// PMM: matrix order.
        #[arg(long, default_value_t = 1024)]
        size: usize,
        /// PMM: row broadcast, flat, binomial or pipelined.
        #[arg(long, default_value = "binomial")]
        bcast: String,
        /// program: the executable, in the agents' allowed directory.
        #[arg(long)]
        program: Option<String>,
        /// Seconds before the job is killed.
        #[arg(long, default_value_t = 600.0)]
        time_limit: f64,
        /// Seconds the agents keep the job alive without hearing from this command (it
        /// renews while it waits); if throttle-ctl is killed, the job dies this long after.
        #[arg(long, default_value_t = throttle_ctl::commands::run::DEFAULT_LEASE_S)]
        lease: f64,
        /// Print one JSON object instead of the workload's output.
        #[arg(long)]
        json: bool,
        /// Arguments for --workload program.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Run a sweep (bandwidth steps x node counts x repeats) and store every run; resumable.
    #[command(
        after_help = "The spec is TOML; see experiments/*.toml. Re-running the same command skips\nthe points already stored (and first removes jobs an earlier, killed run of it left on\nthe agents); Ctrl-C stops after killing the running job. A node that cannot be reached\nfails its points with a reason naming it, and the sweep goes on (--fail-fast stops)."
    )]
    Sweep {
        /// The sweep specification (TOML).
        spec: PathBuf,
        /// Results database [default: ./throttle-results.db].
        #[arg(long)]
        db: Option<PathBuf>,
        /// Stop at the first run that cannot start because a node is unreachable or
        /// refuses it, instead of storing the failure and going on.
        #[arg(long)]
        fail_fast: bool,
        /// Seconds the agents keep a job alive without hearing from this sweep.
        #[arg(long, default_value_t = throttle_ctl::commands::run::DEFAULT_LEASE_S)]
        lease: f64,
    },
    /// Derive CTI curves, bandwidth demand, the demand constant and projections.
    #[command(
        after_help = "Examples:\n  throttle-ctl analyze --predict 4,16\n  throttle-ctl analyze --csv measured.csv --cti 5,10 --json\n  throttle-ctl analyze --db results.db --report report/"
    )]
    Analyze {
        /// Results database [default: ./throttle-results.db].
        #[arg(long, conflicts_with = "csv")]
        db: Option<PathBuf>,
        /// Runs measured with any tool: columns workload,nodes,procs,bw_pct,repeat,seconds.
        #[arg(long)]
        csv: Option<PathBuf>,
        /// CTI levels in percent.
        #[arg(long, default_value = "5,10,15,20,25")]
        cti: String,
        /// Sizes (processes) to project to; measured ones are held out for validation.
        #[arg(long)]
        predict: Option<String>,
        /// The series to analyse when the data holds several.
        #[arg(long)]
        series: Option<String>,
        #[arg(long)]
        json: bool,
        /// Write plots (SVG, PNG) and index.html here.
        #[arg(long)]
        report: Option<PathBuf>,
        /// Completion time to analyse: job (launch to exit), kernel (the workload's own
        /// timing), or auto (kernel when every run reported one).
        #[arg(long, default_value = "auto")]
        time: String,
    },
    /// The whole method end to end on a local emulated cluster (a few minutes).
    #[command(
        after_help = "Writes everything to --dir: cluster file, results.db, sweep.toml, report/index.html.\nThe cluster is taken down at the end, also after an error or Ctrl-C."
    )]
    Demo {
        /// Where the results and the report go.
        #[arg(long, default_value = "throttle-demo")]
        dir: PathBuf,
        /// Node counts (one rank each); the largest is held out for validation. On a
        /// machine with enough cores, square counts (1,4,9,16) give square process grids.
        #[arg(long, default_value = "1,2,3,4")]
        sizes: String,
        /// Emulated link per node.
        #[arg(long, default_value = "1Gbit")]
        capacity: Rate,
        /// BFS graph scale.
        #[arg(long, default_value_t = 14)]
        scale: u32,
        /// BFS searches per run (longer kernels average out scheduling noise).
        #[arg(long, default_value_t = 64)]
        keys: usize,
        #[arg(long, default_value_t = 3)]
        repeats: u32,
        /// Bandwidth steps (percent; ranges START:STOP:STEP allowed).
        #[arg(long, default_value = "100,40,20,14,10,7,5,3")]
        bandwidths: String,
        #[arg(long, default_value = "5,10,15,20,25")]
        cti: String,
        /// Print the analysis as JSON at the end instead of the tables.
        #[arg(long)]
        json: bool,
    },
    /// Write every stored run as CSV.
    Export {
        #[arg(long)]
        db: Option<PathBuf>,
        /// Output file [default: standard output].
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Measure what each link really carries at 100%, and what this host can carry at all.
    Calibrate {
        /// Seconds per measurement.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum LocalCommand {
    /// Start N agents on 127.0.1.1, 127.0.1.2, ... and write the cluster file.
    Up {
        #[arg(long, default_value_t = 4)]
        nodes: usize,
        /// Emulated link capacity per node and direction (payload): 1Gbit, 10Gbit, 125MB.
        #[arg(long, default_value = "1Gbit")]
        capacity: Rate,
        /// First loopback address.
        #[arg(long, default_value = "127.0.1.1")]
        base_addr: Ipv4Addr,
        /// Bucket depth of every agent while traffic waits, ms of traffic (catch-up after a stall).
        #[arg(long, default_value_t = 10.0)]
        burst_ms: f64,
        /// Bucket depth of every agent when its link is idle, ms of traffic.
        #[arg(long, default_value_t = 1.0)]
        idle_burst_ms: f64,
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
    },
    /// Stop the local cluster's agents and remove its state and cluster file.
    Down,
}

#[derive(Subcommand, Debug)]
enum ForwardCommand {
    /// Listen on ADDR on node FROM and carry each connection to HOST:PORT as seen from node TO.
    #[command(
        after_help = "Example (iperf3 from n0 to a server on n1, shaped by both links):\n  throttle-ctl forward add --from n0 --listen 127.0.1.1:5201 --to n1:127.0.1.2:5201\n  iperf3 -c 127.0.1.1 -p 5201"
    )]
    Add {
        #[arg(long)]
        from: String,
        #[arg(long)]
        listen: String,
        /// NODE:HOST:PORT
        #[arg(long)]
        to: String,
        #[arg(long)]
        json: bool,
    },
    /// List the forwards of every node.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove forward ID from NODE (open connections carry on).
    Rm {
        #[arg(long)]
        node: String,
        id: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Parse `a,b,c`.
fn parse_list<T: std::str::FromStr>(text: &str, flag: &str) -> Result<Vec<T>> {
    text.split(',')
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<T>().map_err(|_| {
                anyhow::anyhow!("{flag}: `{s}` is not a number (write a list like 5,10,15)")
            })
        })
        .collect()
}

/// Set by Ctrl-C (SIGINT) or SIGTERM; the running job is then killed and the command stops.
fn interrupt_flag() -> Result<&'static std::sync::atomic::AtomicBool> {
    static FLAG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    ctrlc::set_handler(|| {
        if FLAG.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nstopping: killing the running job (Ctrl-C again to quit at once)");
    })
    .map_err(|e| anyhow::anyhow!("cannot install the Ctrl-C handler: {e}"))?;
    Ok(&FLAG)
}

fn print_json(v: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn run(cli: Cli) -> Result<ExitCode> {
    let path = resolve_path(cli.cluster);
    match cli.command {
        Command::Local(LocalCommand::Up {
            nodes,
            capacity,
            base_addr,
            burst_ms,
            idle_burst_ms,
            agent_threads,
            dir,
            tls,
        }) => {
            let dir = dir.unwrap_or_else(|| {
                path.parent()
                    .map(|p| p.join(".throttle-local"))
                    .unwrap_or_else(|| PathBuf::from(".throttle-local"))
            });
            let req = local::LocalUp {
                nodes,
                capacity,
                base_addr,
                dir,
                agent_args: vec![
                    "--burst-ms".into(),
                    burst_ms.to_string(),
                    "--idle-burst-ms".into(),
                    idle_burst_ms.to_string(),
                    "--threads".into(),
                    agent_threads.to_string(),
                ],
                tls,
            };
            let cluster = local::up(&req, &path)?;
            eprintln!(
                "started {} agents; cluster file {}:",
                cluster.file.nodes.len(),
                path.display()
            );
            print!("{}", std::fs::read_to_string(&path)?);
        }
        Command::Local(LocalCommand::Down) => {
            let stopped = local::down(&path)?;
            println!(
                "stopped {} agents ({}); removed {}",
                stopped.len(),
                stopped.join(", "),
                path.display()
            );
        }
        Command::Status { json } => {
            let cluster = Cluster::load(&path)?;
            let results = status::collect(&cluster);
            let ok = results.iter().all(|(_, r)| r.is_ok());
            if json {
                print_json(&status::to_json(&results))?;
            } else {
                print!("{}", status::render(&results).0);
            }
            if !ok {
                return Ok(ExitCode::from(1));
            }
        }
        Command::Set {
            pct,
            node,
            latency_us,
            capacity,
            json,
        } => {
            let shape = set::SetShape::parse(&pct, capacity.as_deref(), latency_us)?;
            let cluster = Cluster::load(&path)?;
            let applied = set::run(&cluster, node.as_deref(), &shape)?;
            if json {
                print_json(&applied)?;
            } else {
                for s in applied {
                    println!(
                        "{}: {} of {} ({}), latency {} us",
                        s.node,
                        status::pct_text(s.pct),
                        s.capacity,
                        s.limit_bytes_per_sec
                            .map(throttle_agent::rate::format_bits_per_sec)
                            .unwrap_or_else(|| "no limit".into()),
                        s.latency_us
                    );
                }
            }
        }
        Command::Forward(ForwardCommand::Add {
            from,
            listen,
            to,
            json,
        }) => {
            let cluster = Cluster::load(&path)?;
            let v = forward::add(&cluster, &from, &listen, &to)?;
            if json {
                print_json(&v)?;
            } else {
                println!(
                    "forward {} on {from}: {} -> {}:{}",
                    v["id"],
                    v["listen"].as_str().unwrap_or_default(),
                    v["to_node"].as_str().unwrap_or_default(),
                    v["target"].as_str().unwrap_or_default()
                );
            }
        }
        Command::Forward(ForwardCommand::List { json }) => {
            let cluster = Cluster::load(&path)?;
            let (table, v) = forward::list(&cluster)?;
            if json {
                print_json(&v)?;
            } else {
                print!("{}", table.render());
            }
        }
        Command::Forward(ForwardCommand::Rm { node, id }) => {
            let cluster = Cluster::load(&path)?;
            forward::remove(&cluster, &node, id)?;
            println!("removed forward {id} on {node}");
        }
        Command::Run {
            workload,
            nodes,
            ranks_per_node,
            bw,
            scale,
            edge_factor,
            keys,
            no_validate,
            size,
            bcast,
            program,
            time_limit,
            lease,
            json,
            args,
        } => {
            let bw_pct =
                throttle_agent::link::parse_pct(&bw).map_err(|e| anyhow::anyhow!("--bw: {e}"))?;
            if !(time_limit.is_finite() && time_limit > 0.0) {
                anyhow::bail!("--time-limit must be a positive number of seconds");
            }
            let workload = match workload.as_str() {
                "bfs" => run_cmd::Workload::Bfs {
                    scale,
                    edge_factor,
                    keys,
                    validate: !no_validate,
                },
                "pmm" => {
                    if !["flat", "binomial", "pipelined"].contains(&bcast.as_str()) {
                        anyhow::bail!("--bcast must be flat, binomial or pipelined");
                    }
                    run_cmd::Workload::Pmm { size, bcast }
                }
                "program" => run_cmd::Workload::Program {
                    program: program.ok_or_else(|| {
                        anyhow::anyhow!("--workload program needs --program NAME")
                    })?,
                    args,
                },
                other => anyhow::bail!("unknown workload `{other}`: use bfs, pmm or program"),
            };
            let cluster = Cluster::load(&path)?;
            let spec = run_cmd::RunSpec {
                workload,
                nodes,
                ranks_per_node,
                bw_pct,
                time_limit_s: time_limit,
                lease_s: lease,
                job_prefix: None,
            };
            let cancel = interrupt_flag()?;
            let outcome = run_cmd::run_cancellable(&cluster, &spec, cancel)?;
            if json {
                println!("{}", serde_json::to_string(&outcome)?);
            } else {
                for line in &outcome.output {
                    println!("{line}");
                }
                println!(
                    "job {}: {} on {} procs ({} nodes x {}), bw {}: {} in {:.3} s",
                    outcome.job,
                    outcome.workload,
                    outcome.procs,
                    outcome.nodes,
                    outcome.ranks_per_node,
                    status::pct_text(outcome.bw_pct),
                    outcome.status,
                    outcome.seconds
                );
            }
            if outcome.status != "ok" {
                eprintln!(
                    "error: {}",
                    outcome.reason.as_deref().unwrap_or("the job failed")
                );
                return Ok(ExitCode::from(1));
            }
        }
        Command::Sweep {
            spec,
            db,
            fail_fast,
            lease,
        } => {
            let sweep = throttle_ctl::sweep::Sweep::load(&spec)?;
            let cluster = Cluster::load(&path)?;
            let db = db.unwrap_or_else(|| PathBuf::from(throttle_ctl::store::DEFAULT_DB));
            let store = throttle_ctl::store::Store::open(&db)?;
            let options = throttle_ctl::sweep::SweepOptions {
                job_prefix: throttle_ctl::sweep::job_prefix(&db, &sweep.series),
                lease_s: lease,
                fail_fast,
            };
            let cancel = interrupt_flag()?;
            eprintln!(
                "sweep {}: {} points ({} node counts x {} bandwidths x {} repeats), results in {}",
                sweep.series,
                sweep.points.len(),
                sweep.spec.nodes.len(),
                sweep.points.len() / sweep.spec.nodes.len() / sweep.spec.repeats as usize,
                sweep.spec.repeats,
                db.display()
            );
            match throttle_ctl::sweep::run(&sweep, &cluster, &store, &options, cancel, |l| {
                eprintln!("{l}")
            })? {
                throttle_ctl::sweep::SweepEnd::Complete {
                    ran,
                    skipped,
                    gave_up,
                } => {
                    println!("sweep complete: {ran} runs now, {skipped} already stored, {gave_up} points given up; analyze with `throttle-ctl analyze --db {}`", db.display());
                    if gave_up > 0 {
                        return Ok(ExitCode::from(1));
                    }
                }
                throttle_ctl::sweep::SweepEnd::Interrupted { ran } => {
                    eprintln!("interrupted after {ran} runs; everything stored is kept in {}. Run the same command to resume.", db.display());
                    return Ok(ExitCode::from(130));
                }
            }
        }
        Command::Analyze {
            db,
            csv,
            cti,
            predict,
            series,
            json,
            report,
            time,
        } => {
            let levels = parse_list::<f64>(&cti, "--cti")?;
            if levels.iter().any(|c| !(c.is_finite() && *c > 0.0)) {
                anyhow::bail!("--cti levels must be positive percentages, e.g. 5,10,15");
            }
            let predict = match predict {
                Some(p) => parse_list::<u32>(&p, "--predict")?,
                None => Vec::new(),
            };
            let (obs, capacity, time_source) = match csv {
                Some(f) => {
                    let text = std::fs::read_to_string(&f)
                        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", f.display()))?;
                    let obs = throttle_ctl::analysis::csv::parse(&text)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
                    (
                        obs,
                        None,
                        format!("the `seconds` column of {}", f.display()),
                    )
                }
                None => {
                    let db = db.unwrap_or_else(|| PathBuf::from(throttle_ctl::store::DEFAULT_DB));
                    if !db.exists() {
                        anyhow::bail!("no results database at {}: run a sweep first (`throttle-ctl sweep SPEC.toml`) or pass --db/--csv", db.display());
                    }
                    let store = throttle_ctl::store::Store::open(&db)?;
                    let (obs, what) = store.observations(&time)?;
                    (obs, store.capacity()?, what)
                }
            };
            let req = throttle_ctl::analysis::Request {
                cti: levels.clone(),
                predict,
                series,
                time_source,
            };
            let a = throttle_ctl::analysis::analyze(&obs, &req)?;
            let cap = capacity.map(throttle_agent::rate::format_bits_per_sec);
            if json {
                print_json(&a)?;
            } else {
                print!(
                    "{}",
                    throttle_ctl::analysis::render(&a, &levels, cap.as_deref())
                );
            }
            if let Some(dir) = report {
                let index = throttle_ctl::report::write(&dir, &a, &levels, cap.as_deref())?;
                eprintln!("report: {}", index.display());
            }
        }
        Command::Demo {
            dir,
            sizes,
            capacity,
            scale,
            keys,
            repeats,
            bandwidths,
            cti,
            json,
        } => {
            let levels = parse_list::<f64>(&cti, "--cti")?;
            let opts = throttle_ctl::commands::demo::DemoOptions {
                dir,
                sizes: parse_list::<usize>(&sizes, "--sizes")?,
                capacity,
                scale,
                keys,
                repeats,
                bandwidths: bandwidths
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .collect(),
                cti: levels,
            };
            let cancel = interrupt_flag()?;
            let started = std::time::Instant::now();
            let r = throttle_ctl::commands::demo::run(&opts, cancel, |l| eprintln!("{l}"))?;
            if json {
                print_json(&r.analysis)?;
            } else {
                println!();
                print!("{}", r.text);
            }
            eprintln!(
                "\ndemo {} in {:.0} s; results {}, report {}",
                if r.interrupted {
                    "interrupted (partial results analysed)"
                } else {
                    "finished"
                },
                started.elapsed().as_secs_f64(),
                r.db.display(),
                r.report.display()
            );
            if r.interrupted {
                return Ok(ExitCode::from(130));
            }
        }
        Command::Export { db, out } => {
            let db = db.unwrap_or_else(|| PathBuf::from(throttle_ctl::store::DEFAULT_DB));
            if !db.exists() {
                anyhow::bail!("no results database at {}", db.display());
            }
            let store = throttle_ctl::store::Store::open(&db)?;
            match out {
                Some(f) => store.export_csv(std::io::BufWriter::new(std::fs::File::create(&f)?))?,
                None => store.export_csv(std::io::stdout().lock())?,
            }
        }
        Command::Calibrate { seconds, json } => {
            if !(seconds.is_finite() && (0.1..=60.0).contains(&seconds)) {
                anyhow::bail!("--seconds must be between 0.1 and 60");
            }
            let cluster = Cluster::load(&path)?;
            let results = calibrate::run(&cluster, seconds, |m| eprintln!("calibrating {m}"))?;
            if json {
                print_json(&results)?;
            } else {
                print!("{}", calibrate::render(&results));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
