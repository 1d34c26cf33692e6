//! throttle-ctl end to end: real agent processes started by `local up`, driven by the CLI.

use std::io::{Read, Write};
use std::process::{Command, Output};

use throttle_tests::*;

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn err(out: Output) -> String {
    assert!(
        !out.status.success(),
        "should have failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn local_cluster_lifecycle_status_set_and_errors() {
    let d = scratch("life");
    let dir = &d.0;
    let up = ok(ctl(
        dir,
        &[
            "local",
            "up",
            "--nodes",
            "3",
            "--capacity",
            "800Mbit",
            "--base-addr",
            "127.0.5.1",
        ],
    ));
    assert!(up.contains("127.0.5.3"), "{up}");
    assert!(dir.join("throttle-cluster.toml").exists());
    // A second `up` is refused while the first runs.
    assert!(err(ctl(dir, &["local", "up", "--nodes", "2"])).contains("already up"));

    let status: serde_json::Value =
        serde_json::from_str(&ok(ctl(dir, &["status", "--json"]))).unwrap();
    assert_eq!(status.as_array().unwrap().len(), 3);
    assert_eq!(status[0]["capacity_bytes_per_sec"], 100e6);
    assert_eq!(status[2]["pct"], 100.0);

    ok(ctl(dir, &["set", "25"]));
    ok(ctl(
        dir,
        &["set", "unlimited", "--node", "n1", "--latency-us", "30"],
    ));
    let status: serde_json::Value =
        serde_json::from_str(&ok(ctl(dir, &["status", "--json"]))).unwrap();
    assert_eq!(status[0]["pct"], 25.0);
    assert_eq!(status[0]["limit_bytes_per_sec"], 25e6);
    assert_eq!(status[1]["pct"], "unlimited");
    assert_eq!(status[1]["latency_us"], 30);
    let table = ok(ctl(dir, &["status"]));
    assert!(
        table.contains("unlimited") && table.contains("25%"),
        "{table}"
    );

    // A node by its address, as exec and hostfiles name it; a latency that large is
    // said to be so.
    let out = ctl(
        dir,
        &[
            "set",
            "100",
            "--node",
            "127.0.5.3",
            "--latency-us",
            "10000000",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("adds 10000 ms to every message"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ok(ctl(
        dir,
        &["set", "100", "--node", "n2", "--latency-us", "0"],
    ));
    for (args, hint) in [
        (&["set", "0"][..], "0.01 to 100"),
        (&["set", "150"][..], "0.01 to 100"),
        (&["set", "NaN"][..], "0.01 to 100"),
        (&["set", "50", "--node", "n7"][..], "unknown node `n7`"),
        (&["set", "50", "--capacity=-3Gbit"][..], "--capacity"),
        (
            &[
                "forward",
                "add",
                "--from",
                "n0",
                "--listen",
                "127.0.0.1:0",
                "--to",
                "n9:127.0.0.1:80",
            ][..],
            "unknown node `n9`",
        ),
        (
            &[
                "forward",
                "add",
                "--from",
                "n0",
                "--listen",
                "127.0.0.1:0",
                "--to",
                "n1",
            ][..],
            "NODE:HOST:PORT",
        ),
        (
            &["forward", "rm", "--node", "n0", "99"][..],
            "`throttle-ctl forward list` shows the forwards",
        ),
    ] {
        let e = err(ctl(dir, args));
        assert!(e.contains(hint), "{args:?}: {e}");
    }
    // Nothing was changed by the refused commands.
    // A node by its address, as exec and hostfiles name it; a latency that large is
    // said to be so.
    let out = ctl(
        dir,
        &[
            "set",
            "100",
            "--node",
            "127.0.5.3",
            "--latency-us",
            "10000000",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("adds 10000 ms to every message"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ok(ctl(
        dir,
        &["set", "100", "--node", "n2", "--latency-us", "0"],
    ));
    let status: serde_json::Value =
        serde_json::from_str(&ok(ctl(dir, &["status", "--json"]))).unwrap();
    assert_eq!(status[0]["pct"], 25.0);

    let down = ok(ctl(dir, &["local", "down"]));
    assert!(down.contains("stopped 3 agents"), "{down}");
    assert!(!dir.join("throttle-cluster.toml").exists());
    // Twice is not an error.
    let again = ok(ctl(dir, &["local", "down"]));
    assert!(again.contains("nothing to stop"), "{again}");
    assert!(err(ctl(dir, &["status"])).contains("local up"));
}

#[test]
fn forward_through_the_cli_is_shaped_and_byte_exact() {
    let d = up("fwd", 2, "80Mbit", "127.0.6.1");
    let dir = &d.0;
    // A server on "n1" that returns the sum of what it received.
    let l = std::net::TcpListener::bind("127.0.6.2:0").unwrap();
    let target = format!("n1:{}", l.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        let sum: u64 = all
            .iter()
            .enumerate()
            .map(|(i, b)| (i as u64 + 1) * *b as u64)
            .sum();
        c.write_all(&sum.to_le_bytes()).unwrap();
        all.len()
    });
    let v: serde_json::Value = serde_json::from_str(&ok(ctl(
        dir,
        &[
            "forward",
            "add",
            "--from",
            "n0",
            "--listen",
            "127.0.6.1:0",
            "--to",
            &target,
            "--json",
        ],
    )))
    .unwrap();
    let listen = v["listen"].as_str().unwrap().to_string();
    ok(ctl(dir, &["set", "50"])); // 5 MB/s
    let data: Vec<u8> = (0..5_000_000u64).map(|i| (i * 7 + i / 251) as u8).collect();
    let want: u64 = data
        .iter()
        .enumerate()
        .map(|(i, b)| (i as u64 + 1) * *b as u64)
        .sum();
    let start = std::time::Instant::now();
    let mut c = std::net::TcpStream::connect(&listen).unwrap();
    c.write_all(&data).unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut sum = [0u8; 8];
    c.read_exact(&mut sum).unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(server.join().unwrap(), data.len());
    assert_eq!(u64::from_le_bytes(sum), want, "checksum differs");
    // 5 MB at 5 MB/s: about a second (the first burst and socket buffers make it a bit less).
    assert!((0.7..3.0).contains(&secs), "took {secs:.2} s");
    let list = ok(ctl(dir, &["forward", "list"]));
    assert!(list.contains(&listen), "{list}");
    let cal = ok(ctl(dir, &["calibrate", "--seconds", "0.5", "--json"]));
    let cal: serde_json::Value = serde_json::from_str(&cal).unwrap();
    let e = cal["links"][0]["error"].as_f64().unwrap();
    assert!(e.abs() < 0.1, "calibration error {e}");
    // Calibration restored the shape it found.
    let status: serde_json::Value =
        serde_json::from_str(&ok(ctl(dir, &["status", "--json"]))).unwrap();
    assert_eq!(status[0]["pct"], 50.0);
}

#[test]
fn unmodified_iperf3_through_a_forward_gets_the_shaped_rate() {
    if Command::new("iperf3").arg("--version").output().is_err() {
        throttle_tests::skip(
            "unmodified_iperf3_through_a_forward_gets_the_shaped_rate",
            "iperf3 (apt-get install iperf3)",
            "THROTTLE_REQUIRE_NETNS",
        );
        return;
    }
    let d = up("iperf", 2, "200Mbit", "127.0.7.1");
    let dir = &d.0;
    let port = std::net::TcpListener::bind("127.0.7.2:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // One server for every stream (it serves them one after another), killed on the way
    // out whatever happens.
    struct Server(std::process::Child);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _server = Server(
        Command::new("iperf3")
            .args(["-s", "-B", "127.0.7.2", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let v: serde_json::Value = serde_json::from_str(&ok(ctl(
        dir,
        &[
            "forward",
            "add",
            "--from",
            "n0",
            "--listen",
            "127.0.7.1:0",
            "--to",
            &format!("n1:127.0.7.2:{port}"),
            "--json",
        ],
    )))
    .unwrap();
    let listen: std::net::SocketAddr = v["listen"].as_str().unwrap().parse().unwrap();
    ok(ctl(dir, &["set", "50"])); // 100 Mbit/s

    // One 3-second stream through a proxy agent on a 2-core machine with a busy loop
    // beside it fell to 0.84 of its setting once (the agent waiting for a CPU); a shaping
    // error shows in every stream. The bound: one of three streams within 0.9-1.05.
    let mut ratios = Vec::new();
    for _ in 0..3 {
        let mut out = None;
        let mut failed = String::new();
        for _ in 0..50 {
            let o = Command::new("iperf3")
                .args([
                    "-c",
                    "127.0.7.1",
                    "-p",
                    &listen.port().to_string(),
                    "-t",
                    "3",
                    "-J",
                ])
                .output()
                .unwrap();
            if o.status.success() {
                out = Some(o);
                break;
            }
            failed = String::from_utf8_lossy(&o.stdout).to_string();
            // The server may not be listening yet.
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let out = out.unwrap_or_else(|| panic!("iperf3 client never succeeded: {failed}"));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let bps = v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap();
        let ratio = bps / 100e6;
        if (0.9..1.05).contains(&ratio) {
            return;
        }
        ratios.push(ratio);
    }
    panic!("iperf3 received outside 0.9-1.05 of its setting three times: {ratios:.3?}");
}

/// `local up --tls`: the agents' control APIs speak HTTPS with certificates from a fresh
/// cluster CA; the controller checks them; plain HTTP gets no answer.
#[test]
fn a_tls_cluster_is_served_over_https_only() {
    let s = scratch("tls");
    let dir = &s.0;
    ok(ctl(
        dir,
        &[
            "local",
            "up",
            "--nodes",
            "2",
            "--base-addr",
            "127.0.18.1",
            "--tls",
        ],
    ));
    let file = std::fs::read_to_string(dir.join("throttle-cluster.toml")).unwrap();
    assert!(file.contains("tls_ca"), "{file}");
    let status: serde_json::Value =
        serde_json::from_str(&ok(ctl(dir, &["status", "--json"]))).unwrap();
    assert_eq!(status[0]["tls"], true, "{status}");
    ok(ctl(dir, &["set", "40"]));
    // Plain HTTP to a control port: no HTTP answer.
    let control = file
        .lines()
        .find_map(|l| l.strip_prefix("control = "))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap();
    let mut c = std::net::TcpStream::connect(&control).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    c.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let _ = c.read_to_end(&mut answer);
    assert!(
        !String::from_utf8_lossy(&answer).contains("200 OK"),
        "plain HTTP was served"
    );
    // A controller that does not trust the CA refuses to talk.
    let stripped: String = file
        .lines()
        .filter(|l| !l.starts_with("tls_ca"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.join("plain.toml"), stripped).unwrap();
    let e = err(ctl(dir, &["--cluster", "plain.toml", "set", "50"]));
    assert!(e.contains("node `n0`"), "{e}");
}

/// `cluster init` writes a cluster file and token from a Slurm-style host list, and the
/// agent lines it prints, started as printed, make a cluster `status` and `set` reach.
#[test]
fn cluster_init_writes_a_cluster_the_printed_agent_lines_serve() {
    let d = scratch("init");
    let dir = &d.0;
    let socks = dir.join("socks");
    std::fs::create_dir(&socks).unwrap();
    std::fs::set_permissions(&socks, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let out = ok(ctl(
        dir,
        &[
            "cluster",
            "init",
            "--hosts",
            "127.0.3.[1-2]",
            "--capacity",
            "800Mbit",
            "--control-port",
            "17600",
            "--data-port",
            "17601",
            "--socket-dir",
            socks.to_str().unwrap(),
            "--json",
        ],
    ));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"], 2);
    let token = dir.join("throttle-token");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&token).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    // Again without --force: refused, nothing replaced.
    let before = std::fs::read_to_string(&token).unwrap();
    let e = err(ctl(
        dir,
        &[
            "cluster",
            "init",
            "--hosts",
            "127.0.3.1",
            "--capacity",
            "1Gbit",
        ],
    ));
    assert!(e.contains("--force"), "{e}");
    assert_eq!(std::fs::read_to_string(&token).unwrap(), before);
    let mut agents = Vec::new();
    for a in v["agents"].as_array().unwrap() {
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
        assert_eq!(args[0], "throttle-agent");
        let ready = dir.join(format!("{}.ready", a["node"].as_str().unwrap()));
        let mut agent = Command::new(bin_dir().join("throttle-agent"));
        agent.args(&args[1..]).stderr(std::process::Stdio::null());
        let name = format!("agent {}", a["node"]);
        agents.push(throttle_testkit::agent::start(agent, &ready, &name));
    }
    ok(ctl(dir, &["set", "40"]));
    let status = ok(ctl(dir, &["status", "--json"]));
    let s: serde_json::Value = serde_json::from_str(&status).unwrap();
    let nodes = s.as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{status}");
    for n in nodes {
        assert_eq!(n["pct"], 40.0, "{n}");
        assert_eq!(n["capacity_bytes_per_sec"], 100e6, "{n}");
    }
}

/// Inside a Slurm allocation: the node list from SLURM_JOB_NODELIST, brackets expanded;
/// outside one, an error that says so.
#[test]
fn cluster_init_reads_the_slurm_node_list() {
    let d = scratch("slurm");
    let dir = &d.0;
    let run = |env: Option<&str>| {
        let mut c = Command::new(exe());
        c.current_dir(dir)
            .args([
                "cluster",
                "init",
                "--slurm",
                "--capacity",
                "10Gbit",
                "--force",
                "--json",
            ])
            .env_remove("SLURM_JOB_NODELIST")
            .env_remove("SLURM_NODELIST");
        if let Some(list) = env {
            c.env("SLURM_JOB_NODELIST", list);
        }
        c.output().unwrap()
    };
    let e = err(run(None));
    assert!(e.contains("SLURM_JOB_NODELIST is not set"), "{e}");
    let out = ok(run(Some("127.0.4.[1-3],127.0.4.9")));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"], 4);
    let file = std::fs::read_to_string(dir.join("throttle-cluster.toml")).unwrap();
    for a in ["127.0.4.1:7600", "127.0.4.3:7601", "127.0.4.9:7600"] {
        assert!(file.contains(a), "{file}");
    }
    assert!(err(run(Some("node[1-"))).contains("without its `]`"));
}

/// Issue 55, finding 5: the controller sends its token only to an agent that proves it
/// holds it, at the address dialed. A cluster file naming the real token file but another
/// address gets no token there: neither a stranger's listener (which cannot prove
/// anything) nor a relay that passes every byte on to the real agent (whose proof names
/// its own address, not the relay's). The real cluster still answers.
#[test]
fn the_token_goes_only_to_an_agent_that_proves_it_holds_it() {
    let c = up("prove", 1, "1Gbit", "127.0.76.1");
    let cluster = std::fs::read_to_string(c.0.join("throttle-cluster.toml")).unwrap();
    let token_file = cluster
        .lines()
        .find(|l| l.starts_with("token_file"))
        .and_then(|l| l.split('"').nth(1))
        .unwrap();
    let token = std::fs::read_to_string(c.0.join(token_file)).unwrap();
    let token = token.trim().to_string();
    let control: std::net::SocketAddr = cluster
        .lines()
        .find(|l| l.starts_with("control"))
        .and_then(|l| l.split('"').nth(1))
        .unwrap()
        .parse()
        .unwrap();
    // What reached each stand-in, every byte.
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let relay = |listener: std::net::TcpListener, to: Option<std::net::SocketAddr>| {
        let heard = heard.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let heard = heard.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let upstream = to.and_then(|a| std::net::TcpStream::connect(a).ok());
                    if let Some(mut up) = upstream {
                        let mut back = up.try_clone().unwrap();
                        let mut client = conn.try_clone().unwrap();
                        std::thread::spawn(move || {
                            let _ = std::io::copy(&mut back, &mut client);
                        });
                        while let Ok(n) = conn.read(&mut buf) {
                            if n == 0 || up.write_all(&buf[..n]).is_err() {
                                break;
                            }
                            heard.lock().unwrap().extend_from_slice(&buf[..n]);
                        }
                    } else {
                        let n = conn.read(&mut buf).unwrap_or(0);
                        heard.lock().unwrap().extend_from_slice(&buf[..n]);
                        let zeros = "0".repeat(64);
                        let _ = conn.write_all(
                            format!("HTTP/1.1 204 No Content\r\nx-throttle-proof: {zeros}\r\nconnection: close\r\n\r\n").as_bytes(),
                        );
                    }
                });
            }
        });
    };
    let stranger = std::net::TcpListener::bind("127.0.76.9:0").unwrap();
    let through = std::net::TcpListener::bind("127.0.76.10:0").unwrap();
    let (stranger_at, through_at) = (
        stranger.local_addr().unwrap(),
        through.local_addr().unwrap(),
    );
    relay(stranger, None);
    relay(through, Some(control));
    for at in [stranger_at, through_at] {
        let copy = c.0.join(format!("copied-{}.toml", at.port()));
        std::fs::write(
            &copy,
            cluster.replace(&control.to_string(), &at.to_string()),
        )
        .unwrap();
        std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let out = ctl(&c.0, &["status", "--cluster", copy.to_str().unwrap()]);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{at}: {said}");
        assert!(
            said.contains("did not prove it holds the token"),
            "{at}: {said}"
        );
    }
    let heard = String::from_utf8_lossy(&heard.lock().unwrap()).to_string();
    assert!(heard.contains("GET /prove"), "{heard}");
    assert!(
        !heard.contains(&token) && !heard.contains("Bearer"),
        "the token went to a stand-in: {heard}"
    );
    // Dialed directly, the agent proves it and answers.
    let out = ctl(&c.0, &["status"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
