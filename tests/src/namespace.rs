//! Namespace hosts for the interception tests (kernel redirect and preload library):
//! whether this machine can run them, a cluster of them, their agents' counters, and
//! Open MPI across them.

use std::path::Path;
use std::process::Command;

use crate::{ctl, exe, scratch, Scratch};

pub fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// The tests of this file change the host's interfaces (bridges come and go), which
/// mpirun enumerates and publishes: they run one at a time.
static HOST_NETWORK: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    HOST_NETWORK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether this machine can run namespace hosts; prints why not. With
/// `THROTTLE_REQUIRE_NETNS=1` (CI sets it when it runs as root) a missing prerequisite is
/// a failure, not a skip.
pub fn can_run(test: &str) -> bool {
    let missing = if !nix::unistd::geteuid().is_root() {
        Some("root (network namespaces, veth, nftables)")
    } else if !have("ip", "-V") || !have("nft", "-v") {
        Some("`ip` (iproute2) and `nft` (nftables)")
    } else {
        None
    };
    match missing {
        None => true,
        Some(what) => {
            crate::skip(test, what, "THROTTLE_REQUIRE_NETNS");
            false
        }
    }
}

pub fn up_netns(tag: &str, nodes: usize, subnet: &str) -> Scratch {
    up_netns_with(tag, nodes, subnet, &[])
}

/// [`up_netns`] with more `local up` flags (`--intercept preload`).
pub fn up_netns_with(tag: &str, nodes: usize, subnet: &str, extra: &[&str]) -> Scratch {
    let s = scratch(tag);
    let nodes = nodes.to_string();
    let mut args = vec![
        "local",
        "up",
        "--netns",
        "--nodes",
        &nodes,
        "--capacity",
        "1Gbit",
        "--subnet",
        subnet,
    ];
    args.extend_from_slice(extra);
    let out = ctl(&s.0, &args);
    assert!(
        out.status.success(),
        "local up --netns: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

pub fn cluster(dir: &Path) -> toml::Value {
    toml::from_str(&std::fs::read_to_string(dir.join("throttle-cluster.toml")).unwrap()).unwrap()
}

pub fn netns_of(dir: &Path, node: usize) -> String {
    cluster(dir)["node"][node]["netns"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Run `f` on a thread inside the network namespace `ns` (setns changes the calling
/// thread only): its sockets belong to that node.
pub fn in_node<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = std::fs::File::open(&path).unwrap();
        nix::sched::setns(fd, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        f()
    })
    .join()
    .unwrap()
}

pub fn status_json(dir: &Path) -> serde_json::Value {
    let out = ctl(dir, &["status", "--json"]);
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn intercepted(dir: &Path, node: usize, dir_: &str) -> u64 {
    status_json(dir)[node]["intercepted"][dir_]
        .as_u64()
        .unwrap()
}

/// The MPI program of the interception tests: ping-pong, a checked bandwidth loop and an
/// allreduce (shared with `bench/mpi.sh`).
pub const MPI_PROGRAM: &str = include_str!("../../bench/mpi_bandwidth.c");

pub fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
}

/// Whether Open MPI can be used here; says why not (a failure when
/// `THROTTLE_REQUIRE_NETNS` is set, as in CI).
pub fn have_mpi(test: &str) -> bool {
    if have("mpicc", "--version") && have("mpirun", "--version") {
        return true;
    }
    crate::skip(
        test,
        "Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev)",
        "THROTTLE_REQUIRE_NETNS",
    );
    false
}

/// Build [`MPI_PROGRAM`] as `mpitest` in the scratch directory, with a hostfile for
/// `nodes` hosts of `subnet` (`198.18.S.0/24`).
pub fn build_mpi(s: &Scratch, subnet: &str, nodes: usize) {
    std::fs::write(s.0.join("mpitest.c"), MPI_PROGRAM).unwrap();
    let out = Command::new("mpicc")
        .args(["-O2", "-o", "mpitest", "mpitest.c"])
        .current_dir(&s.0)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mpicc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prefix = subnet.trim_end_matches("0/24");
    let hosts: String = (1..=nodes)
        .map(|i| format!("{prefix}{i} slots=1\n"))
        .collect();
    std::fs::write(s.0.join("hosts"), hosts).unwrap();
}

/// Run `program` on `np` ranks (one per host of the hostfile) with mpirun, Open MPI's TCP
/// BTL, `throttle-ctl exec` as the launch agent, at bandwidth `pct`, for at most `limit_s`
/// seconds; the output's `ranks=` line, or the output and the agents' last log lines when
/// mpirun failed.
pub fn mpi_run(
    s: &Scratch,
    subnet: &str,
    np: usize,
    program: &[&str],
    pct: &str,
    env: &[(&str, &str)],
    limit_s: u32,
) -> Result<String, String> {
    let out = ctl(&s.0, &["set", pct]);
    assert!(out.status.success());
    let agent = format!("{} exec", exe().display());
    let mut cmd = Command::new("timeout");
    cmd.args([
        &limit_s.to_string(),
        "mpirun",
        "--allow-run-as-root",
        "--mca",
        "plm_rsh_agent",
        &agent,
    ])
    .args([
        "--mca",
        "btl",
        "tcp,self",
        "--mca",
        "mpi_yield_when_idle",
        "1",
    ])
    // Open MPI 4.1's orted can crash writing its hwloc topology to shared memory
    // when several daemons share a machine (seen here 1 run in 12); binding is not needed.
    .args(["--mca", "rtc", "^hwloc"])
    // mpirun's daemons reach it over the bridge only.
    .args(["--mca", "oob_tcp_if_include", subnet])
    .args(["--hostfile", "hosts", "-np", &np.to_string()])
    .args(program)
    .current_dir(&s.0)
    .env("THROTTLE_CLUSTER", s.0.join("throttle-cluster.toml"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let logs: String = (0..np)
            .map(|n| {
                let log = std::fs::read_to_string(s.0.join(format!(".throttle-local/n{n}.log")))
                    .unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(8).collect();
                format!(
                    "--- n{n}.log (last lines, newest first)\n{}\n",
                    tail.join("\n")
                )
            })
            .collect();
        let status = ctl(&s.0, &["status", "--json"]);
        return Err(format!(
            "mpirun at {pct} ({}): {stdout}\n{}\nagents:\n{logs}\nstatus: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&status.stdout)
        ));
    }
    Ok(stdout
        .lines()
        .find(|l| l.starts_with("ranks="))
        .unwrap_or_else(|| panic!("no result line: {stdout}"))
        .to_string())
}
