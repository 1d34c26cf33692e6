//! `throttle-ctl deploy` against real sshd: namespace hosts each run Debian's sshd on
//! their own address, with a host key and a client key made for the test; a third host
//! has no sshd. Needs root (namespaces) and openssh-server (CI installs it).

use std::process::{Child, Command, Output};

use throttle_tests::namespace::*;
use throttle_tests::{ctl, exe};

const SSHD: &str = "/usr/sbin/sshd";

/// Kills its sshd when the test ends.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn deploy_starts_checks_and_stops_agents_over_ssh_and_reports_a_dead_host() {
    let test = "deploy_starts_checks_and_stops_agents_over_ssh_and_reports_a_dead_host";
    if !can_run(test) {
        return;
    }
    if !std::path::Path::new(SSHD).exists() || !have("ssh", "-V") {
        throttle_tests::skip(
            test,
            &format!("openssh-server ({SSHD}) and ssh"),
            "THROTTLE_REQUIRE_NETNS",
        );
        return;
    }
    let _serial = serial();
    // Namespace hosts whose own agents use the preload path (no kernel rules between the
    // nodes), so the deployed agents' traffic is their own.
    let s = up_netns_with("deploy", 2, "198.18.73.0/24", &["--intercept", "preload"]);
    let dir = &s.0;
    let keygen = |name: &str| {
        let st = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", ""])
            .arg("-f")
            .arg(dir.join(name))
            .status()
            .unwrap();
        assert!(st.success());
    };
    keygen("hostkey");
    keygen("clientkey");
    std::fs::copy(dir.join("clientkey.pub"), dir.join("authorized_keys")).unwrap();
    let _ = std::fs::create_dir_all("/run/sshd");
    let mut daemons = Vec::new();
    for n in 0..2 {
        let cfg = dir.join(format!("sshd{n}.cfg"));
        std::fs::write(
            &cfg,
            format!(
                "ListenAddress 198.18.73.{}\nPort 22\nHostKey {}\nAuthorizedKeysFile {}\nStrictModes no\nPermitRootLogin prohibit-password\nUsePAM no\nPidFile none\n",
                n + 1,
                dir.join("hostkey").display(),
                dir.join("authorized_keys").display()
            ),
        )
        .unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &netns_of(dir, n), SSHD, "-D", "-e", "-f"])
            .arg(&cfg)
            .stderr(std::fs::File::create(dir.join(format!("sshd{n}.log"))).unwrap())
            .spawn()
            .unwrap();
        daemons.push(Daemon(child));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    // A cluster of the two hosts and one without sshd (no host at .3), on other ports
    // than the namespace hosts' own agents.
    let c = dir.join("real");
    std::fs::create_dir(&c).unwrap();
    let init = ctl(
        &c,
        &[
            "cluster",
            "init",
            "--hosts",
            "n0=198.18.73.1,n1=198.18.73.2,n2=198.18.73.3",
            "--capacity",
            "1Gbit",
            "--control-port",
            "7700",
            "--data-port",
            "7701",
            "--socket-dir",
            dir.join("socks").to_str().unwrap(),
        ],
    );
    assert!(init.status.success(), "{}", text(&init));
    let key = dir.join("clientkey");
    let remote = dir.join("remote");
    let deploy = |what: &str| {
        Command::new(exe())
            .current_dir(&c)
            .args([
                "deploy",
                what,
                "--json",
                "--remote-dir",
                remote.to_str().unwrap(),
            ])
            .args([
                "--ssh-option=-i",
                &format!("--ssh-option={}", key.display()),
            ])
            .args(["--ssh-option=-o", "--ssh-option=StrictHostKeyChecking=no"])
            .args([
                "--ssh-option=-o",
                "--ssh-option=UserKnownHostsFile=/dev/null",
            ])
            .args(["--ssh-option=-o", "--ssh-option=LogLevel=ERROR"])
            .output()
            .unwrap()
    };
    let rows = |o: &Output| -> Vec<serde_json::Value> {
        serde_json::from_slice::<Vec<serde_json::Value>>(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(o)))
    };
    let started = deploy("start");
    assert_eq!(started.status.code(), Some(1), "{}", text(&started));
    let r = rows(&started);
    assert_eq!(r.len(), 3);
    throttle_tests::json_doc::check("deploy", &serde_json::Value::Array(r.clone()), false);
    assert!(
        r[0]["ok"].as_bool().unwrap() && r[1]["ok"].as_bool().unwrap(),
        "{r:?}"
    );
    assert!(!r[2]["ok"].as_bool().unwrap(), "{r:?}");
    assert!(
        r[2]["detail"].as_str().unwrap().contains("198.18.73.3"),
        "{r:?}"
    );
    // Copied with their modes, into each node's own directory.
    let mode = |p: &str| {
        std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(remote.join(p)).unwrap().permissions(),
        ) & 0o777
    };
    assert_eq!(mode("n0/token"), 0o600);
    assert_eq!(mode("n1/throttle-agent"), 0o700);
    // The deployed agents run inside their hosts and carry the cluster's settings.
    let set = ctl(&c, &["set", "40", "--node", "n1"]);
    let st = ctl(&c, &["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(v[1]["pct"], 40.0, "{} {}", text(&set), text(&st));
    assert_eq!(v[0]["node"], "n0");
    // Started twice: refused where one runs.
    let again = rows(&deploy("start"));
    assert!(
        again[0]["detail"]
            .as_str()
            .unwrap()
            .contains("already runs"),
        "{again:?}"
    );
    let status = rows(&deploy("status"));
    assert!(
        status[0]["ok"].as_bool().unwrap()
            && status[0]["detail"].as_str().unwrap().starts_with("pid "),
        "{status:?}"
    );
    let stopped = rows(&deploy("stop"));
    assert_eq!(stopped[0]["detail"], "stopped", "{stopped:?}");
    assert_eq!(stopped[1]["detail"], "stopped", "{stopped:?}");
    let after = rows(&deploy("status"));
    assert!(
        !after[0]["ok"].as_bool().unwrap()
            && after[0]["detail"]
                .as_str()
                .unwrap()
                .contains("no agent process"),
        "{after:?}"
    );
}
