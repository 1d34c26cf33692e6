//! throttle's end-to-end tests: the real `throttle-ctl`, `throttle-agent` and workload
//! binaries, driven across crates. This library is their shared scaffolding: run
//! `throttle-ctl` in a scratch directory, and stop whatever local cluster it started when
//! the test ends.
//!
//! The binaries are the ones `cargo test --workspace` builds next to the test executables
//! (`target/<profile>/`): the packages that own them have integration tests of their own,
//! which makes cargo build them.

pub mod json_doc;
pub mod loopback;
pub mod namespace;
pub mod workspace;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch directory; on drop its local cluster is taken down and the directory removed,
/// also when an assertion failed.
pub struct Scratch(pub PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = ctl(&self.0, &["local", "down", "--force"]);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub use throttle_testkit::stall::{Stall, Stalled};
pub use throttle_testkit::{bin_dir, skip};

pub fn scratch(tag: &str) -> Scratch {
    let p = std::env::temp_dir().join(format!("throttle-ctl-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    Scratch(p)
}

/// The preload library as cargo built it: `cargo build` copies it next to the binaries,
/// `cargo test` leaves it in `deps/`; the newer of the two is this build's.
pub fn preload_lib() -> PathBuf {
    let name = "libthrottle_preload.so";
    let built = [bin_dir().join(name), bin_dir().join("deps").join(name)];
    built
        .iter()
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .cloned()
        .unwrap_or_else(|| panic!("{name} is not built next to {}", bin_dir().display()))
}

/// The `throttle-ctl` binary.
pub fn exe() -> PathBuf {
    bin_dir().join("throttle-ctl")
}

/// The binaries a local cluster runs: the controller, the agent and the workloads it
/// launches, side by side in [`bin_dir`].
pub const BINARIES: [&str; 7] = [
    "throttle-ctl",
    "throttle-agent",
    "throttle-bfs",
    "throttle-pmm",
    "throttle-mw",
    "throttle-loggps",
    "throttle-selftest",
];

/// Run `throttle-ctl ARGS` in `dir` (the cluster file there, not `$THROTTLE_CLUSTER`).
pub fn ctl(dir: &Path, args: &[&str]) -> Output {
    let exe = exe();
    for bin in BINARIES {
        assert!(
            exe.with_file_name(bin).exists(),
            "{bin} is missing next to throttle-ctl: run the tests with `cargo test --workspace`"
        );
    }
    Command::new(exe)
        .args(args)
        .current_dir(dir)
        .env_remove("THROTTLE_CLUSTER")
        .output()
        .unwrap()
}

/// A scratch directory with a local cluster of `nodes` agents on `base` and up.
pub fn up(tag: &str, nodes: usize, capacity: &str, base: &str) -> Scratch {
    let s = scratch(tag);
    let out = ctl(
        &s.0,
        &[
            "local",
            "up",
            "--nodes",
            &nodes.to_string(),
            "--capacity",
            capacity,
            "--base-addr",
            base,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

/// What a command printed on standard output, after checking that it succeeded (its
/// output and errors are the failure's message).
pub fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A child process killed when the test ends, passed or not: with its process group when
/// it leads one (spawned with `process_group(0)`: a shell and the program it started).
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let pid = self.0.id() as i32;
        if nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid)))
            .is_ok_and(|g| g.as_raw() == pid)
        {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The JSON a command printed, after checking that it succeeded.
pub fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `throttle-ctl run --json ARGS` in `dir`: (exit success, the JSON printed, stderr).
pub fn json_run(dir: &Path, args: &[&str]) -> (bool, serde_json::Value, String) {
    let mut a = vec!["run", "--json"];
    a.extend_from_slice(args);
    let out = ctl(dir, &a);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.success(), v, stderr)
}

/// The pid of node `name`'s agent, from the cluster file `local up` wrote in `dir`.
pub fn agent_pid(dir: &Path, name: &str) -> i32 {
    let text = std::fs::read_to_string(dir.join("throttle-cluster.toml")).unwrap();
    let file: toml::Value = toml::from_str(&text).unwrap();
    file["node"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"].as_str() == Some(name))
        .and_then(|n| n["pid"].as_integer())
        .unwrap() as i32
}

/// The pid of node `name`'s agent once the cluster file in `dir` names one (`None`
/// before: a cluster still starting, or none).
pub fn agent_pid_once(dir: &Path, name: &str) -> Option<i32> {
    let text = std::fs::read_to_string(dir.join("throttle-cluster.toml")).ok()?;
    let file: toml::Value = toml::from_str(&text).ok()?;
    file.get("node")?
        .as_array()?
        .iter()
        .find(|n| n.get("name").and_then(|v| v.as_str()) == Some(name))?
        .get("pid")?
        .as_integer()
        .map(|p| p as i32)
}

/// How often [`sweep_to_the_end`] runs a sweep again with `--retry-given-up`.
pub const GIVEN_UP_RETRIES: usize = 2;

/// Run the sweep `throttle-ctl ARGS` in `dir`, and where it ends with points given up
/// (exit 1, "point(s) given up"), run it again with `--retry-given-up`, as the sweep
/// advises, up to [`GIVEN_UP_RETRIES`] times. A point is given up after its attempts were
/// all flagged: on a CI runner whose hypervisor steals, or beside other tests' agents,
/// one point in a sweep of 18-54 is, by chance (stop 60's CI: the resume test, and the
/// newcomer's sweep of 54 points, 1 given up in each). A test of resuming or of the
/// answer is not a test of that chance; a point given up three times running is not
/// chance, and the test sees it. Returns every attempt's output, the first first.
pub fn sweep_to_the_end(dir: &Path, args: &[&str]) -> Vec<Output> {
    let mut outs = vec![ctl(dir, args)];
    while outs.len() <= GIVEN_UP_RETRIES {
        let last = outs.last().unwrap();
        let gave_up = last.status.code() == Some(1)
            && String::from_utf8_lossy(&last.stderr).contains("point(s) given up");
        if !gave_up {
            break;
        }
        let mut again = args.to_vec();
        again.push("--retry-given-up");
        outs.push(ctl(dir, &again));
    }
    outs
}

/// A sweep's `--json` result: (runs stored, of them flagged or failed). Every run is
/// stored, the ones that do not count as well (their points run again), so a sweep of P
/// points stores P + flagged + failed runs on a busy machine, P on an idle one.
pub fn sweep_runs(end: &serde_json::Value) -> (u64, u64) {
    let r = &end["result"];
    let n = |k: &str| {
        r[k].as_u64()
            .unwrap_or_else(|| panic!("the sweep's result has no {k}: {end}"))
    };
    (n("ran"), n("flagged") + n("failed"))
}

/// A stall of n0's agent of the local cluster in `dir` (found when it starts) during its
/// `job`-th job (from 1; a sweep's unstored warm-ups count): 40-80 ms stopped, 10 ms
/// running, until the job's ranks end. The run it lands in is flagged, as some are by
/// chance on a busy machine ([`Stall`]).
pub fn stall_n0(dir: &Path, job: usize) -> Stall {
    let dir = dir.to_path_buf();
    let ms = std::time::Duration::from_millis;
    Stall::during_job(move || agent_pid_once(&dir, "n0"), job, (ms(40), ms(10)))
}
