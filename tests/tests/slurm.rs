//! A real Slurm cluster on namespace hosts: `slurmctld` on the host side of a bridge, one
//! `slurmd` per namespace host (its own node name, address and spool directory: a mount
//! namespace each), munge with a key made for the test. A user's `sbatch` of
//! `deploy/slurm-sweep.sh` then sweeps an unmodified MPI program through the agents `srun`
//! starts, and nothing is left when the job ends.
//!
//! Needs root, Slurm (`slurmctld`, `slurmd`, `sbatch`: Debian's slurmctld, slurmd,
//! slurm-client), munge, Open MPI, iproute2 and nftables; skips with the reason
//! otherwise, and fails instead when `THROTTLE_REQUIRE_SLURM` is set (`.ci/run` sets it
//! after installing them).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use throttle_tests::namespace::have;
use throttle_tests::{bin_dir, scratch, Scratch};

const BRIDGE: &str = "thslurm0";
const SUBNET: &str = "198.19.10";
const NODES: usize = 2;
/// Not Slurm's default ports, so that a Slurm of the machine's own is left alone.
const CTLD_PORT: u16 = 6917;
const SLURMD_PORT: u16 = 6918;
/// The spool directory every slurmd sees at the same path, each its own (bind-mounted
/// in the slurmd's private mount namespace).
const SPOOL: &str = "/var/spool/throttle-test-slurmd";

fn ns(i: usize) -> String {
    format!("thslurm-n{i}")
}

/// Whether this machine can run the test; says why not (or fails, when required).
fn can_run(test: &str) -> bool {
    let missing = if !nix::unistd::geteuid().is_root() {
        Some("root (namespace hosts, slurmd)")
    } else if !have("ip", "-V") || !have("nft", "-v") {
        Some("iproute2 and nftables")
    } else if !have("slurmctld", "-V") || !have("slurmd", "-V") || !installed("sbatch") {
        Some("Slurm (apt-get install slurmctld slurmd slurm-client)")
    } else if !have("munged", "--version") {
        Some("munge (apt-get install munge)")
    } else if !have("mpicc", "--version") || !have("mpirun", "--version") {
        Some("Open MPI (apt-get install openmpi-bin libopenmpi-dev)")
    } else {
        None
    };
    match missing {
        None => true,
        Some(what) => {
            throttle_tests::skip(test, what, "THROTTLE_REQUIRE_SLURM");
            false
        }
    }
}

/// Whether `program` is on PATH (sbatch cannot be run without a configuration).
fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ip(args: &[&str]) {
    run(Command::new("ip").args(args));
}

/// The Slurm cluster and its hosts; everything is stopped and removed on drop.
struct Slurm {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<Child>,
}

impl Slurm {
    fn start(dir: &Path) -> Slurm {
        let mut s = Slurm {
            dir: dir.to_path_buf(),
            conf: dir.join("slurm.conf"),
            daemons: Vec::new(),
        };
        // Leftovers of an interrupted run.
        s.remove_hosts();
        ip(&["link", "add", BRIDGE, "type", "bridge"]);
        ip(&["addr", "add", &format!("{SUBNET}.254/24"), "dev", BRIDGE]);
        ip(&["link", "set", BRIDGE, "up"]);
        for i in 1..=NODES {
            let (ns, veth) = (ns(i), format!("thslurm-v{i}"));
            ip(&["netns", "add", &ns]);
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ]);
            ip(&["link", "set", &veth, "master", BRIDGE, "up"]);
            let addr = format!("{SUBNET}.{i}/24");
            ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            std::fs::create_dir_all(dir.join(format!("spool-n{i}"))).unwrap();
        }
        std::fs::create_dir_all(SPOOL).unwrap();
        std::fs::create_dir_all(dir.join("state")).unwrap();
        // munge, with a key of the test's own, on a socket of its own.
        let key = dir.join("munge.key");
        std::fs::write(
            &key,
            (0..1024).map(|i| (i * 7 + 13) as u8).collect::<Vec<u8>>(),
        )
        .unwrap();
        run(Command::new("chmod").args(["400"]).arg(&key));
        let socket = dir.join("munge.socket");
        s.daemons.push(
            Command::new("munged")
                .args(["--foreground", "--force"])
                .arg(format!("--key-file={}", key.display()))
                .arg(format!("--socket={}", socket.display()))
                .arg(format!("--pid-file={}", dir.join("munged.pid").display()))
                .arg(format!("--seed-file={}", dir.join("munged.seed").display()))
                .arg(format!("--log-file={}", dir.join("munged.log").display()))
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let host = run(Command::new("hostname").arg("-s")).trim().to_string();
        let nodes: String = (1..=NODES)
            .map(|i| format!("NodeName=n{i} NodeAddr={SUBNET}.{i} CPUs=1 State=UNKNOWN\n"))
            .collect();
        let names: Vec<String> = (1..=NODES).map(|i| format!("n{i}")).collect();
        let d = dir.display();
        std::fs::write(
            &s.conf,
            format!(
                "ClusterName=throttletest\n\
                 SlurmctldHost={host}({SUBNET}.254)\n\
                 SlurmctldPort={CTLD_PORT}\nSlurmdPort={SLURMD_PORT}\n\
                 AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={}\n\
                 StateSaveLocation={d}/state\n\
                 SlurmctldPidFile={d}/slurmctld.pid\nSlurmctldLogFile={d}/slurmctld.log\n\
                 SlurmdSpoolDir={SPOOL}\nSlurmdPidFile={SPOOL}/slurmd.pid\nSlurmdLogFile={SPOOL}/slurmd.log\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\n\
                 ReturnToService=2\nSchedulerType=sched/builtin\n\
                 SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n\
                 SlurmUser=root\nSlurmdUser=root\n\
                 JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
                 {nodes}PartitionName=test Nodes={} Default=YES MaxTime=INFINITE State=UP\n",
                socket.display(),
                names.join(",")
            ),
        )
        .unwrap();
        std::fs::write(dir.join("cgroup.conf"), "CgroupPlugin=cgroup/v1\n").unwrap();
        s.daemons.push(
            Command::new("slurmctld")
                .args(["-D", "-i", "-f"])
                .arg(&s.conf)
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        for i in 1..=NODES {
            // Its own spool at the shared path, in a mount namespace of its own; the
            // network namespace entered without remounting /sys (slurmd reads cgroups).
            let spool = dir.join(format!("spool-n{i}"));
            s.daemons.push(
                Command::new("unshare")
                    .args(["--mount", "--propagation", "private", "sh", "-c"])
                    .arg(format!(
                        "mount --bind {} {SPOOL} && exec nsenter --net=/run/netns/{} slurmd -D -N n{i} -f {}",
                        spool.display(),
                        ns(i),
                        s.conf.display()
                    ))
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
        }
        // Until every node is idle.
        let start = Instant::now();
        loop {
            let out = s.cmd("sinfo").args(["-h", "-o", "%T %D"]).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            if text.trim() == format!("idle {NODES}") {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the Slurm nodes did not come up: {text}; slurmctld.log: {}",
                std::fs::read_to_string(dir.join("slurmctld.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        s
    }

    /// A Slurm command against this cluster.
    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    fn remove_hosts(&self) {
        for i in 1..=NODES {
            // The host side of a veth outlives its namespace while the kernel still
            // holds the namespace (closing TCP connections: up to minutes).
            let veth = format!("thslurm-v{i}");
            let _ = Command::new("ip").args(["link", "del", &veth]).output();
            let _ = Command::new("ip").args(["netns", "del", &ns(i)]).output();
        }
        let _ = Command::new("ip").args(["link", "del", BRIDGE]).output();
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        for d in self.daemons.iter_mut().rev() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(d.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        for d in &mut self.daemons {
            let start = Instant::now();
            while d.try_wait().ok().flatten().is_none() && start.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = d.kill();
            let _ = d.wait();
        }
        self.remove_hosts();
        let _ = std::fs::remove_dir(SPOOL);
        let _ = &self.dir;
    }
}

/// The fields of one CSV line (quoted fields may hold commas and doubled quotes).
fn fields(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// Processes whose executable is `exe`.
fn processes(exe: &Path) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe))
        .collect()
}

#[test]
fn a_sweep_submitted_with_sbatch_runs_through_the_agents_srun_starts() {
    let test = "a_sweep_submitted_with_sbatch_runs_through_the_agents_srun_starts";
    if !can_run(test) {
        return;
    }
    let started = Instant::now();
    let s: Scratch = scratch("slurm");
    // Everyone may enter the scratch directory (the job's processes run as root here,
    // but slurmstepd checks the working directory).
    std::fs::set_permissions(&s.0, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let slurm = Slurm::start(&s.0);
    std::fs::write(
        s.0.join("mpitest.c"),
        throttle_tests::namespace::MPI_PROGRAM,
    )
    .unwrap();
    run(Command::new("mpicc")
        .args(["-O2", "-o", "mpitest", "mpitest.c"])
        .current_dir(&s.0));
    // An unmodified MPI program, one rank per node, 8 MB each way. On a busy 2-core
    // machine the agents are starved and flag runs: 5 retries rather than 2 (with two
    // busy loops beside it, 2 retries gave a point up, failing the job, in 2 runs of 2;
    // 5 retries passed 3 of 3).
    let spec = format!(
        "workload = \"command\"\nnodes = [2]\nbandwidths = [100, 20]\nrepeats = 1\nrandomize = false\nretries = 5\n\
         [command]\nrun = '''mpirun --allow-run-as-root --mca btl tcp,self --mca mpi_yield_when_idle 1 \
         --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 -np {{procs}} --map-by node {}/mpitest 8388608'''\n\
         time_regex = 'seconds=([0-9.]+)'\n",
        s.0.display()
    );
    std::fs::write(s.0.join("spec.toml"), spec).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/slurm-sweep.sh");
    let out_dir = s.0.join("out");
    let submitted = Instant::now();
    let sbatch = slurm
        .cmd("sbatch")
        .args(["--parsable", "-N", "2", "--time", "10"])
        .arg(format!("--output={}", s.0.join("job.out").display()))
        .arg(format!("--chdir={}", s.0.display()))
        .arg(&script)
        .arg(s.0.join("spec.toml"))
        .arg("1Gbit")
        .env("BIN", bin_dir())
        .env("OUT", &out_dir)
        .output()
        .unwrap();
    assert!(
        sbatch.status.success(),
        "sbatch: {}{}",
        String::from_utf8_lossy(&sbatch.stdout),
        String::from_utf8_lossy(&sbatch.stderr)
    );
    let id = String::from_utf8_lossy(&sbatch.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    // Until the job has ended, looked at every 0.2 s: `sbatch --wait` looks after 2, 8,
    // then every 32 s, which adds up to 32 s to what a job seems to take.
    let (state, record) = loop {
        let out = slurm
            .cmd("scontrol")
            .args(["show", "job", "-o", &id])
            .output()
            .unwrap();
        let record = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let state = record
            .split_whitespace()
            .find_map(|f| f.strip_prefix("JobState="))
            .unwrap_or_default()
            .to_string();
        if !["PENDING", "CONFIGURING", "RUNNING", "COMPLETING", ""].contains(&state.as_str()) {
            break (state, record);
        }
        assert!(
            submitted.elapsed() < Duration::from_secs(900),
            "job {id} did not end: {record}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let job_seconds = submitted.elapsed().as_secs_f64();
    let log = std::fs::read_to_string(s.0.join("job.out")).unwrap_or_default();
    let agents = std::fs::read_to_string(out_dir.join("agents.log")).unwrap_or_default();
    assert!(
        state == "COMPLETED",
        "the job ended {state}: {record}\njob output:\n{log}\nagents:\n{agents}"
    );
    // Runs the agents flagged (a busy machine) are retried: more than 2 runs then.
    assert!(
        log.contains("sweep complete: ") && log.contains(", 0 points given up"),
        "{log}"
    );
    assert!(log.contains("BOTTOM LINE"), "the analysis ran: {log}");

    // The stored runs: both ok, their bytes crossed the agents, and 20% is slower.
    let export = Command::new(bin_dir().join("throttle-ctl"))
        .args(["export", "--db"])
        .arg(out_dir.join("results.db"))
        .output()
        .unwrap();
    let csv = String::from_utf8_lossy(&export.stdout).to_string();
    let mut rows = csv.lines().filter(|l| !l.starts_with('#')).map(fields);
    let header = rows.next().unwrap();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (mut seconds, mut walls) = (std::collections::BTreeMap::new(), Vec::new());
    for r in rows {
        assert_eq!(r[col("status")], "ok", "{csv}");
        let sent: u64 = r[col("bytes_sent")].parse().unwrap();
        assert!(
            sent >= 8 << 20,
            "a run's 8 MB did not cross the agents ({sent} bytes): {csv}"
        );
        walls.push(r[col("wall_seconds")].parse::<f64>().unwrap_or(f64::NAN));
        if r[col("flag")].is_empty() {
            seconds.insert(
                r[col("bw_pct")].clone(),
                r[col("seconds")].parse::<f64>().unwrap(),
            );
        }
    }
    let (Some(&full), Some(&slow)) = (seconds.get("100"), seconds.get("20")) else {
        panic!("no unflagged run at 100% or 20%: {csv}");
    };
    assert!(
        slow > 3.0 * full,
        "at 20% the program took {slow} s, at 100% {full} s: not shaped"
    );
    // Where the job's time went: the script's phases, and each stored run's wall time
    // (its mpirun from start to end).
    let timeline: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("slurm-sweep:"))
        .collect();
    // The job's time: 8-10 s on the idle 2-core machine (scheduling 1.8 s, agents 0.3 s,
    // warm-up and 2 runs after a 1 s settle each 4.5 s, analysis 1.5 s, stopping 0.2 s),
    // 9-20 s with two busy loops beside it and load average 2-3.6 (the agents, starved,
    // flag runs, which are retried: 5 retries a point at most, 2 s each). A step left
    // waiting for srun's own retry (what cost 122-130 s a time before the job's steps
    // overlapped) adds 60 s or more.
    assert!(
        job_seconds < 60.0,
        "the job took {job_seconds:.1} s (the stored runs' wall times {walls:.2?} s):\n{}",
        timeline.join("\n")
    );
    // Stopping the agents: 0.2-1 s. A wait for scancel's reply that a stopping agent
    // dropped is MessageTimeout (10 s).
    let at = |phase: &str| {
        timeline.iter().find(|l| l.ends_with(phase)).and_then(|l| {
            l.strip_prefix("slurm-sweep:")?
                .split(" s:")
                .next()?
                .trim()
                .parse::<f64>()
                .ok()
        })
    };
    let (Some(analysed), Some(stopped)) = (at("analysis done"), at("agents stopped")) else {
        panic!("the job's output lacks its phases: {log}");
    };
    assert!(
        stopped - analysed < 5.0,
        "stopping the agents took {:.1} s:\n{}",
        stopped - analysed,
        timeline.join("\n")
    );

    // Nothing left: no agent, no interception rules in the hosts, no token copies.
    std::thread::sleep(Duration::from_millis(500));
    let agent = bin_dir().join("throttle-agent").canonicalize().unwrap();
    let left = processes(&agent);
    assert!(left.is_empty(), "agents {left:?} outlived the job");
    for i in 1..=NODES {
        let tables =
            run(Command::new("ip").args(["netns", "exec", &ns(i), "nft", "list", "tables"]));
        assert!(
            !tables.contains("throttle"),
            "n{i} kept its rules: {tables}"
        );
    }
    let job = log
        .lines()
        .find_map(|l| l.strip_prefix("results in "))
        .map(|p| p.trim().to_string())
        .unwrap_or_default();
    let leftovers: Vec<PathBuf> = std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .and_then(|f| f.strip_prefix("throttle-"))
                .is_some_and(|id| id.chars().all(|c| c.is_ascii_digit()))
                && p.metadata().is_ok_and(|m| {
                    m.modified()
                        .is_ok_and(|t| t.elapsed().unwrap_or_default() < started.elapsed())
                })
        })
        .collect();
    assert!(leftovers.is_empty(), "the job left {leftovers:?} ({job})");
    eprintln!(
        "slurm: the job took {job_seconds:.1} s from sbatch to its end (100%: {full} s, 20%: {slow} s; \
         the stored runs' wall times {walls:.2?} s); the whole test {:.1} s\n{}",
        started.elapsed().as_secs_f64(),
        timeline.join("\n")
    );
    drop(slurm);
}
