//! Every command that changes a link holds it through one lease (`link_lease.rs`), and
//! puts it back however it ends: killed outright (SIGKILL: no handler, no drop), each
//! agent goes back by itself when the lease runs out; finished, the operator's shape
//! reloaded meanwhile (SIGHUP) is what it goes back to, not the shape from before.
//! (`run` killed outright: `command.rs`; Ctrl-C: `conventions.rs`.)

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use throttle_tests::*;

/// Node `i`'s pct as `status --json` reports it (unlimited: 0).
fn pct(dir: &Path, i: usize) -> f64 {
    let out = ctl(dir, &["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v[i]["pct"].as_f64().unwrap_or(-1.0)
}

/// Wait up to `within` for `done`; whether it came.
fn until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done()
}

fn spawn(dir: &Path, args: &[&str]) -> Child {
    Command::new(exe())
        .args(args)
        .current_dir(dir)
        .env_remove("THROTTLE_CLUSTER")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `sweep`, `model loggps` and `calibrate`, each killed with SIGKILL while its bandwidth is
/// set: the links are back at their resting shape (50%) within the lease (2 s) and the
/// agent's check, whatever the command was doing.
#[test]
fn a_killed_sweep_model_or_calibration_leaves_the_links_as_they_were() {
    let c = up("leasekill", 2, "200Mbit", "127.0.51.1");
    let dir = &c.0;
    stdout_of(&ctl(dir, &["set", "50"]));
    assert_eq!(pct(dir, 0), 50.0);
    std::fs::write(
        dir.join("spec.toml"),
        "workload = \"program\"\nnodes = [2]\nbandwidths = [100]\nrepeats = 1\ntime_limit = 200\n[program]\nname = \"throttle-selftest\"\nargs = [\"--sleep\", \"63.5\"]\n",
    )
    .unwrap();
    let commands: [(&str, &[&str], f64); 3] = [
        (
            "sweep",
            &["sweep", "spec.toml", "--db", "s.db", "--lease", "2"],
            // Its warm-up runs at 100% of the link.
            100.0,
        ),
        (
            "model loggps",
            &[
                "model",
                "loggps",
                "--bandwidths",
                "10",
                "--procs",
                "2",
                "--sizes",
                "1,1024",
                "--stream-seconds",
                "60",
                "--db",
                "m.db",
                "--lease",
                "2",
            ],
            10.0,
        ),
        // Its first measurement is at 100% of the link.
        (
            "calibrate",
            &["calibrate", "--seconds", "30", "--lease", "2"],
            100.0,
        ),
    ];
    for (name, args, during) in commands {
        let mut cmd = spawn(dir, args);
        let set = until(Duration::from_secs(30), || pct(dir, 0) == during);
        cmd.kill().unwrap();
        cmd.wait().unwrap();
        assert!(set, "{name}: its bandwidth {during}% was never set");
        let killed = Instant::now();
        let back = until(Duration::from_secs(6), || {
            pct(dir, 0) == 50.0 && pct(dir, 1) == 50.0
        });
        assert!(
            back,
            "{name}: killed outright, it left the links at {}% and {}% ({:?} after)",
            pct(dir, 0),
            pct(dir, 1),
            killed.elapsed()
        );
        // What a killed command left running ends with its lease too.
        until(Duration::from_secs(6), || {
            let v: serde_json::Value =
                serde_json::from_slice(&ctl(dir, &["status", "--json"]).stdout).unwrap();
            v.as_array()
                .unwrap()
                .iter()
                .all(|n| n["running_jobs"].as_u64() == Some(0))
        });
    }
}

/// The demo, killed with SIGKILL during a throttled run: the cluster it started stays up
/// (nothing ran its drop), and its links are back at 100% within the lease (2 s) and the
/// agents' check.
#[test]
fn a_killed_demo_leaves_its_links_as_they_were() {
    let s = scratch("leasedemo");
    let demo = s.0.join("d");
    // Its cluster, named from the scratch directory: the demo's own directory does not
    // exist until the demo makes it.
    let file = demo.join("throttle-cluster.toml");
    let on_demo = |args: &[&str]| {
        let mut all = vec!["--cluster", file.to_str().unwrap()];
        all.extend_from_slice(args);
        ctl(&s.0, &all)
    };
    // Taken down whatever happens: the killed demo cannot.
    struct Down<'a>(&'a dyn Fn(&[&str]) -> std::process::Output);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            let _ = (self.0)(&["local", "down", "--force"]);
        }
    }
    let _down = Down(&on_demo);
    let mut cmd = spawn(
        &s.0,
        &[
            "demo",
            "--dir",
            demo.to_str().unwrap(),
            "--lease",
            "2",
            "--sizes",
            "1,2,3,4",
            "--bandwidths",
            "10,100",
            "--search",
            "none",
            "--until-width",
            "0",
            "--base-addr",
            "127.0.54.1",
        ],
    );
    let pcts = || -> Vec<f64> {
        let out = on_demo(&["status", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|n| n["pct"].as_f64().unwrap_or(-1.0))
                    .collect()
            })
            .unwrap_or_default()
    };
    let set = until(Duration::from_secs(60), || pcts().contains(&10.0));
    cmd.kill().unwrap();
    cmd.wait().unwrap();
    assert!(set, "the demo never ran at 10%");
    let back = until(Duration::from_secs(6), || {
        let p = pcts();
        p.len() == 4 && p.iter().all(|&x| x == 100.0)
    });
    assert!(
        back,
        "killed outright, the demo left its links at {:?}",
        pcts()
    );
}

/// An operator reloads a node's settings (SIGHUP) while `calibrate` measures its link:
/// when the calibration ends the node is at the reloaded shape, not at the one before the
/// calibration (calibrate wrote the old shape back over it until the one lease).
#[test]
fn a_reload_during_calibrate_is_kept() {
    let s = scratch("leasehup");
    let dir = &s.0;
    let socks = dir.join("socks");
    std::fs::create_dir(&socks).unwrap();
    std::fs::set_permissions(&socks, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let out = ctl(
        dir,
        &[
            "cluster",
            "init",
            "--hosts",
            "127.0.52.[1-2]",
            "--capacity",
            "200Mbit",
            "--control-port",
            "17600",
            "--data-port",
            "17601",
            "--socket-dir",
            socks.to_str().unwrap(),
            "--json",
        ],
    );
    let v = json_of(&out);
    let token = dir.join("throttle-token");
    let mut agents = Vec::new();
    let mut configs = Vec::new();
    for a in v["agents"].as_array().unwrap() {
        let node = a["node"].as_str().unwrap();
        let config = dir.join(format!("{node}.toml"));
        std::fs::write(&config, "pct = 50\n").unwrap();
        let ready = dir.join(format!("{node}.ready"));
        let args: Vec<String> = a["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                s.as_str()
                    .unwrap()
                    .replace("TOKEN_FILE", token.to_str().unwrap())
            })
            .collect();
        let mut agent = Command::new(bin_dir().join("throttle-agent"));
        agent
            .args(&args[1..])
            .arg("--config")
            .arg(&config)
            .stderr(Stdio::null());
        agents.push(throttle_testkit::agent::start(agent, &ready, node));
        configs.push(config);
    }
    assert_eq!(
        (pct(dir, 0), pct(dir, 1)),
        (50.0, 50.0),
        "the settings' pct"
    );
    let calibrate = Command::new(exe())
        .args(["calibrate", "--seconds", "2", "--json"])
        .current_dir(dir)
        .env_remove("THROTTLE_CLUSTER")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut calibrate = calibrate;
    if !until(Duration::from_secs(20), || pct(dir, 0) != 50.0) {
        let _ = calibrate.kill();
        let _ = calibrate.wait();
        panic!("calibrate never changed n0");
    }
    std::fs::write(&configs[0], "pct = 30\n").unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agents[0].pid()),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    let out = calibrate.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        (pct(dir, 0), pct(dir, 1)),
        (30.0, 50.0),
        "after calibrate: n0 at its operator's reloaded 30%, n1 at its 50%"
    );
}
