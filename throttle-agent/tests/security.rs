//! The findings of the security review (issue 7), each reproduced against real agents.
//! Every test here failed on the code before the fix: a job name `..` deleted the agents'
//! state directory; the agent and the controller could be launched; `LD_PRELOAD` passed;
//! the token crossed the data port in clear and the data port relayed to any address;
//! idle connections exhausted the agent's descriptors; `1e-25 %` was accepted and a
//! setting of 0.01 % stalled the link long after `set 100`.

mod common;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use throttle_agent::transport::wire::{Code, PeerWant};
use throttle_proto::auth::Token;
use throttle_proto::os::rank_client as client;

/// Finding 1: names from requests are validated before any path is built from them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_names_cannot_reach_outside_the_job_directory() {
    let scratch = Scratch::new("traversal");
    let agents = cluster(&scratch, 1, shape(Some(50.0), 125e6), true).await;
    let addr = agents[0].control_addr.to_string();
    let sock = agents[0].local_socket.clone();
    let dir = scratch.0.clone();
    tokio::task::spawn_blocking(move || {
        let launch = r#"{"program":"throttle-selftest","ranks":["n0"]}"#;
        let ranks = r#"{"ranks":["n0"]}"#;
        for (method, path, body) in [
            ("POST", "/jobs/%2e%2e/launch", Some(launch)),
            ("POST", "/jobs/../launch", Some(launch)),
            ("POST", "/jobs/.hidden/launch", Some(launch)),
            ("DELETE", "/jobs/%2e%2e", None),
            ("DELETE", "/jobs/.", None),
            ("PUT", "/jobs/..%2F..%2Fx", Some(ranks)),
            ("PUT", "/jobs/a%00b", Some(ranks)),
            ("GET", "/jobs/%2e%2e", None),
            ("POST", "/jobs/%2e%2e/renew", None),
        ] {
            let (code, body) = http(&addr, method, path, Some(TOKEN), body);
            assert_eq!(code, 400, "{method} {path}: {body}");
            assert!(body.contains("job name"), "{method} {path}: {body}");
        }
        // Node names in the directory and forwards pass the same grammar.
        let (code, body) = http(
            &addr,
            "PUT",
            "/cluster",
            Some(TOKEN),
            Some(r#"{"nodes":[{"name":"../n0","data":"127.0.0.1:1"}]}"#),
        );
        assert_eq!(code, 400, "{body}");
        assert!(
            dir.exists() && sock.exists(),
            "the agent's directory was touched"
        );
    })
    .await
    .unwrap();
}

/// Finding 2: only the workloads run; never the agent or the controller; no loader or
/// interpreter variables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_workloads_run_and_their_environment_is_filtered() {
    let scratch = Scratch::new("launch");
    let agents = cluster(&scratch, 1, shape(Some(50.0), 125e6), true).await;
    let addr = agents[0].control_addr.to_string();
    let bin_dir = agent_binary().parent().unwrap().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let agent = bin_dir.join("throttle-agent").display().to_string();
        let ctl = bin_dir.join("throttle-ctl").display().to_string();
        for program in [
            "throttle-agent",
            "throttle-ctl",
            agent.as_str(),
            ctl.as_str(),
            "/bin/sh",
            "sh",
            "../../../../../../bin/sh",
            "/usr/bin/env",
        ] {
            let body = format!(
                r#"{{"program":{},"args":["--cluster","/etc/passwd","status"],"ranks":["n0"]}}"#,
                serde_json::Value::from(program)
            );
            let (code, answer) = http(&addr, "POST", "/jobs/j1/launch", Some(TOKEN), Some(&body));
            assert_eq!(code, 403, "{program}: {answer}");
            assert!(answer.contains("--allow-program"), "{program}: {answer}");
        }
        for var in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "ld_preload",
            "GLIBC_TUNABLES",
            "PATH",
            "BASH_ENV",
            "PYTHONPATH",
            "PERL5OPT",
            "NODE_OPTIONS",
            "THROTTLE_JOB",
            "A=B",
            "",
            // What the deny-list let through.
            "OMPI_MCA_plm_rsh_agent",
            "SSL_CERT_FILE",
            "KRB5_CONFIG",
            "HOME",
            "OMP_TOOL_LIBRARIES",
            "omp_num_threads",
            // Allowed names, but with a path for a value (glibc loads it).
            "TZ",
            "LC_ALL",
        ] {
            let body = format!(
                r#"{{"program":"throttle-selftest","env":{{{}:"/tmp/x.so"}},"ranks":["n0"]}}"#,
                serde_json::Value::from(var)
            );
            let (code, answer) = http(&addr, "POST", "/jobs/j2/launch", Some(TOKEN), Some(&body));
            assert_eq!(code, 400, "{var}: {answer}");
            assert!(answer.contains("environment variable"), "{var}: {answer}");
        }
        // An ordinary variable and a workload are fine.
        let body =
            r#"{"program":"throttle-selftest","env":{"OMP_NUM_THREADS":"2"},"ranks":["n0"]}"#;
        let (code, answer) = http(&addr, "POST", "/jobs/j3/launch", Some(TOKEN), Some(body));
        assert_eq!(code, 201, "{answer}");
        let (code, _) = http(&addr, "DELETE", "/jobs/j3", Some(TOKEN), None);
        assert_eq!(code, 204);
    })
    .await
    .unwrap();
}

/// A TCP relay that records every byte it passes, both ways.
fn recording_relay(to: String) -> (String, Arc<Mutex<Vec<u8>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let log = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(a) = c else { return };
            let Ok(b) = std::net::TcpStream::connect(&to) else {
                continue;
            };
            for (mut from, mut into) in [(a.try_clone().unwrap(), b.try_clone().unwrap()), (b, a)] {
                let log = log.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    loop {
                        match from.read(&mut buf) {
                            Ok(0) | Err(_) => {
                                let _ = into.shutdown(std::net::Shutdown::Write);
                                return;
                            }
                            Ok(n) => {
                                log.lock().unwrap().extend_from_slice(&buf[..n]);
                                if into.write_all(&buf[..n]).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        }
    });
    (addr, seen)
}

/// Finding 3: the token never crosses the data port, and a peer can only reach what
/// belongs to the node it asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_stays_off_the_wire_and_the_data_port_relays_nothing() {
    let scratch = Scratch::new("relay");
    let agents = cluster(&scratch, 2, shape(Some(100.0), 125e6), true).await;
    // n0 reaches n1 through a relay that records everything.
    let (relay, seen) = recording_relay(agents[1].data_addr.to_string());
    let mut nodes = agents[0].state.directory.nodes();
    for n in &mut nodes {
        if n.name.as_str() == "n1" {
            n.data = relay.parse().unwrap();
        }
    }
    agents[0].state.directory.set_nodes(&nodes);
    let echo = echo_server();
    let fwd = forward_to_n1(&agents[0], echo.clone()).await;
    set_job(&agents, "j", &["n0", "n1"]);
    let data1 = agents[1].data_addr.to_string();
    let control0 = agents[0].control_addr.to_string();
    let control1 = agents[1].control_addr.to_string();
    let s1 = agents[1].local_socket.clone();
    let rank_dir = Scratch::new("relay-rank");
    tokio::task::spawn_blocking(move || {
        let mut c = std::net::TcpStream::connect(fwd.listen).unwrap();
        let payload: Vec<u8> = (0..65536u32).map(|i| (i * 7) as u8).collect();
        c.write_all(&payload).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert_eq!(back, payload, "the forward through the relay is byte-exact");
        let wire = seen.lock().unwrap().clone();
        assert!(wire.len() > payload.len(), "the relay saw the stream");
        assert!(
            !wire.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
            "the cluster token crossed the data port"
        );

        let token = Token::new(TOKEN).unwrap();
        let peer = |src: &str, want: PeerWant| {
            let mut d = std::net::TcpStream::connect(&data1).unwrap();
            client::dial_peer(&mut d, &token, &n(src), &n("n1"), want)
        };
        // A node that is not in n1's directory.
        let e = peer(
            "intruder",
            PeerWant::Forward {
                target: echo.clone(),
            },
        )
        .unwrap_err();
        assert_eq!(e.code, Code::Forbidden, "{e}");
        assert!(e.message.contains("intruder"), "{e}");
        // n1's own agent, and a host that is not n1.
        let e = peer(
            "n0",
            PeerWant::Forward {
                target: control1.clone(),
            },
        )
        .unwrap_err();
        assert_eq!(e.code, Code::Forbidden, "{e}");
        let e = peer(
            "n0",
            PeerWant::Forward {
                target: "198.18.0.99:80".into(),
            },
        )
        .unwrap_err();
        assert_eq!(e.code, Code::Forbidden, "{e}");
        assert!(e.message.contains("not an address of node"), "{e}");
        // An intercepted connection to an agent that does not intercept: refused, nothing
        // connected (the transparent socket would otherwise reach any address).
        let e = peer(
            "n0",
            PeerWant::Intercepted {
                src: "127.0.0.1:40000".parse().unwrap(),
                dst: echo.parse().unwrap(),
            },
        )
        .unwrap_err();
        assert_eq!(e.code, Code::Forbidden, "{e}");
        assert!(e.message.contains("does not intercept"), "{e}");
        // A forward rule to another host on the same node is refused when it is added.
        let (code, body) = http(
            &control0,
            "POST",
            "/forwards",
            Some(TOKEN),
            Some(r#"{"listen":"127.0.0.1:0","to_node":"n0","target":"198.18.0.99:80"}"#),
        );
        assert_eq!(code, 403, "{body}");
        // A rank stream only to ranks that run on n1, from the node that runs the source.
        let r0 = rank(&rank_dir, &s1, "j", 0); // a bogus registration of n0's rank on n1
        let e = peer(
            "n0",
            PeerWant::Rank {
                job: n("j"),
                src_rank: 0,
                dst_rank: 0,
            },
        )
        .unwrap_err();
        assert_eq!(e.code, Code::Forbidden, "{e}");
        drop(r0);
        let _r1 = rank(&rank_dir, &s1, "j", 1);
        let e = peer(
            "n0",
            PeerWant::Rank {
                job: n("j"),
                src_rank: 1,
                dst_rank: 1,
            },
        )
        .unwrap_err();
        assert_eq!(e.code, Code::Forbidden, "{e}");
        // The legitimate stream still works.
        let mut d = std::net::TcpStream::connect(&data1).unwrap();
        client::dial_peer(
            &mut d,
            &token,
            &n("n0"),
            &n("n1"),
            PeerWant::Rank {
                job: n("j"),
                src_rank: 0,
                dst_rank: 1,
            },
        )
        .unwrap();
    })
    .await
    .unwrap();
}

/// Finding 4: thousands of idle connections from one host neither exhaust the agent's
/// descriptors nor lock the controller out, and half-sent headers are closed.
#[test]
fn idle_connections_cannot_starve_the_agent() {
    let scratch = Scratch::new("flood");
    // A small open-file limit, so that the flood would exhaust it without the caps.
    let a = spawn_agent_with(&scratch, "n0", &[], Some(1024));
    let mut idle = Vec::new();
    for i in 0..1500 {
        // Two attacking hosts: one on the control API, one on the data port.
        if let Some(s) = connect_from("127.0.0.99", &a.control) {
            idle.push(s);
        }
        if i % 2 == 0 {
            if let Some(s) = connect_from("127.0.0.98", &a.data) {
                idle.push(s);
            }
        }
    }
    assert!(
        idle.len() > 1500,
        "the flood opened only {} connections",
        idle.len()
    );
    let mut partial = connect_from("127.0.0.97", &a.control).unwrap();
    partial
        .write_all(b"GET /status HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let since = Instant::now();
    // The controller, on another address, is served at once.
    let (code, body) = http_within(
        &a.control,
        "GET",
        "/status",
        Some(TOKEN),
        None,
        Duration::from_secs(3),
    );
    assert_eq!(code, 200, "status during the flood: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(v["refused_connections"].as_u64().unwrap() > 0, "{body}");
    // The data port still answers a handshake (here: refusing the agent's own name).
    let mut d = std::net::TcpStream::connect(&a.data).unwrap();
    d.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let e = client::dial_peer(
        &mut d,
        &Token::new(TOKEN).unwrap(),
        &n("n0"),
        &n("n0"),
        PeerWant::Sink,
    )
    .unwrap_err();
    assert_eq!(e.code, Code::Forbidden, "{e}");
    let fds = std::fs::read_dir(format!("/proc/{}/fd", a.child.id()))
        .unwrap()
        .count();
    assert!(fds < 1000, "the agent holds {fds} descriptors");
    // The half-sent header is closed within the header timeout, not held for minutes.
    partial
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 512];
    let _ = partial.read(&mut buf);
    let held = since.elapsed();
    assert!(
        held < throttle_agent::api::HEADER_TIMEOUT + Duration::from_secs(5),
        "a half-sent header was held for {held:?}"
    );
    drop(idle);
}

/// Issue 35, finding 11: a token holder trickling a request's body (1 byte per 0.5 s of
/// a declared 100) is answered 408 within the body timeout, not held until the body ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_body_is_cut_off() {
    let scratch = Scratch::new("trickle");
    let agents = cluster(&scratch, 1, shape(None, 125e6), true).await;
    let addr = agents[0].control_addr;
    tokio::task::spawn_blocking(move || {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        write!(
            c,
            "PUT /shape HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n"
        )
        .unwrap();
        let since = Instant::now();
        let mut got = Vec::new();
        while since.elapsed() < Duration::from_secs(40) {
            if c.write_all(b" ").is_err() {
                break;
            }
            let mut buf = [0u8; 512];
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    break;
                }
                Err(_) => {}
            }
        }
        let held = since.elapsed();
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(
            held < throttle_agent::api::BODY_TIMEOUT + Duration::from_secs(3),
            "a trickled body was held for {held:?}"
        );
    })
    .await
    .unwrap();
}

/// Finding 5: percentages the bucket cannot represent are refused, and the debt of a
/// very low setting does not stall the link after the rate goes up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_percentages_are_refused_and_do_not_stall_the_next_setting() {
    let scratch = Scratch::new("tiny");
    let agents = cluster(&scratch, 2, shape(Some(100.0), 125e6), true).await;
    let echo = echo_server();
    let fwd = forward_to_n1(&agents[0], echo).await;
    let controls: Vec<String> = agents.iter().map(|a| a.control_addr.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        for bad in [r#"{"pct": 1e-25}"#, r#"{"pct": "0.001"}"#, r#"{"pct": 0}"#] {
            let (code, body) = http(&controls[0], "PUT", "/shape", Some(TOKEN), Some(bad));
            assert_eq!(code, 400, "{bad}: {body}");
        }
        let set = |pct: &str| {
            for c in &controls {
                let (code, body) = http(
                    c,
                    "PUT",
                    "/shape",
                    Some(TOKEN),
                    Some(&format!(r#"{{"pct": {pct}}}"#)),
                );
                assert_eq!(code, 200, "{body}");
            }
        };
        // At 0.01 % of 1 Gbit/s (12.5 kB/s) a stream puts the buckets into debt.
        set("0.01");
        let mut slow = std::net::TcpStream::connect(fwd.listen).unwrap();
        slow.set_write_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let _ = slow.write_all(&vec![7u8; 256 * 1024]);
        std::thread::sleep(Duration::from_millis(300));
        set("100");
        drop(slow);
        let start = Instant::now();
        let mut c = std::net::TcpStream::connect(fwd.listen).unwrap();
        let payload = vec![1u8; 100_000];
        c.write_all(&payload).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert_eq!(back.len(), payload.len());
        let took = start.elapsed();
        assert!(
            took < Duration::from_millis(500),
            "100 kB at 100 % took {took:?} after a 0.01 % setting"
        );
    })
    .await
    .unwrap();
}

/// Every refusal is JSON that says what to do: unknown paths, wrong methods, bodies over
/// the limit, bad percent-encoding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_is_json() {
    let scratch = Scratch::new("json");
    let agents = cluster(&scratch, 1, shape(Some(50.0), 125e6), true).await;
    let addr = agents[0].control_addr.to_string();
    tokio::task::spawn_blocking(move || {
        let big = format!(r#"{{"pct": 50, "x": "{}"}}"#, "a".repeat(2 << 20));
        for (method, path, body, want) in [
            ("PATCH", "/status", None, 405),
            ("DELETE", "/shape", None, 405),
            ("GET", "/nope", None, 404),
            ("PUT", "/shape", Some(big.as_str()), 413),
            ("GET", "/jobs/%ff", None, 400),
            ("PUT", "/shape", Some("{"), 400),
        ] {
            let (code, answer) = http(&addr, method, path, Some(TOKEN), body);
            assert_eq!(code, want, "{method} {path}: {answer}");
            let v: serde_json::Value = serde_json::from_str(&answer)
                .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {answer}"));
            assert!(
                v["error"].as_str().is_some_and(|m| !m.is_empty()),
                "{answer}"
            );
        }
    })
    .await
    .unwrap();
}

// Findings of a second review (by probing the fixed agent).

/// `sleep 1000` processes (children that `throttle-selftest --spawn-child` leaves).
fn sleepers() -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| c == b"sleep\x001000\x00")
                .unwrap_or(false)
        })
        .count()
}

/// A DELETE (or a lease running out) while a large launch is still starting ranks leaves
/// no process behind: ranks started after the kill are killed with their children.
#[test]
fn a_job_killed_while_it_launches_leaves_no_process() {
    let scratch = Scratch::new("race");
    let a = spawn_agent(&scratch, "n0", &["--threads", "4"]);
    let before = sleepers();
    let launch = r#"{"program":"throttle-selftest","args":["--spawn-child","--sleep","300"],"ranks":[RANKS],"time_limit_s":600}"#
        .replace("RANKS", &vec!["\"n0\""; 300].join(","));
    let control = a.control.clone();
    let launcher = std::thread::spawn(move || {
        http_within(
            &control,
            "POST",
            "/jobs/race/launch",
            Some(TOKEN),
            Some(&launch),
            Duration::from_secs(60),
        )
    });
    // DELETE as soon as the job exists, while its ranks are still being started.
    let start = Instant::now();
    loop {
        let (code, body) = http(&a.control, "DELETE", "/jobs/race", Some(TOKEN), None);
        if code == 204 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{code} {body}");
    }
    let (lcode, lbody) = launcher.join().unwrap();
    assert!(lcode == 201 || lcode == 409, "launch: {lcode} {lbody}");
    // Children of ranks started late appear a little later.
    std::thread::sleep(Duration::from_secs(2));
    let start = Instant::now();
    while sleepers() > before {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{} child processes outlived their job",
            sleepers() - before
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The ranks' run directories must be private: a directory someone else could enter is
/// refused, not used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_directories_others_could_enter_are_refused() {
    let scratch = Scratch::new("rundir");
    let agents = cluster(&scratch, 1, shape(Some(50.0), 125e6), true).await;
    let base = scratch.path("throttle-jobs-n0");
    std::fs::create_dir_all(&base).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o777)).unwrap();
    let addr = agents[0].control_addr.to_string();
    tokio::task::spawn_blocking(move || {
        let body = r#"{"program":"throttle-selftest","ranks":["n0"]}"#;
        let (code, answer) = http(&addr, "POST", "/jobs/j/launch", Some(TOKEN), Some(body));
        assert_eq!(code, 400, "{answer}");
        assert!(answer.contains("not a private directory"), "{answer}");
        // Nothing is left of the refused launch: not even its rank map.
        let (_, jobs) = http(&addr, "GET", "/jobs", Some(TOKEN), None);
        assert!(!jobs.contains("\"j\""), "{jobs}");
    })
    .await
    .unwrap();
}

/// A client without the token gets one answer per connection, and whoever presented the
/// token recently still gets in while others fill the pool from many addresses.
#[test]
fn clients_without_the_token_cannot_hold_the_control_api() {
    let scratch = Scratch::new("hold");
    let a = spawn_agent(&scratch, "n0", &[]);
    // One 401, then the close: a second request on the same connection gets nothing.
    let mut c = std::net::TcpStream::connect(&a.control).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\n\r\nGET /status HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut all = String::new();
    let _ = c.read_to_string(&mut all);
    assert_eq!(all.matches("HTTP/1.1 401").count(), 1, "{all}");
    // The controller presents the token once; then 4 hosts fill the whole pool.
    let (code, _) = http(&a.control, "GET", "/status", Some(TOKEN), None);
    assert_eq!(code, 200);
    let mut held = Vec::new();
    for host in 1..=4 {
        for _ in 0..20 {
            if let Some(s) = connect_from(&format!("127.0.0.{}", 90 + host), &a.control) {
                held.push(s);
            }
        }
    }
    let (code, body) = http_within(
        &a.control,
        "GET",
        "/status",
        Some(TOKEN),
        None,
        Duration::from_secs(3),
    );
    assert_eq!(code, 200, "the controller was locked out: {body}");
    // A newcomer without the token is refused while the pool is full.
    let (code, _) = http_within(
        &connect_addr(&a.control),
        "GET",
        "/status",
        None,
        None,
        Duration::from_secs(3),
    );
    assert!(code == 503 || code == 0 || code == 401, "{code}");
    drop(held);
}

fn connect_addr(a: &str) -> String {
    a.to_string()
}

/// Refusals are logged at most about once a second, however many come.
#[test]
fn a_flood_of_refusals_does_not_fill_the_log() {
    let scratch = Scratch::new("logflood");
    let log = scratch.path("agent.log");
    let a = spawn_agent_logging(&scratch, "n0", &log);
    for _ in 0..300 {
        let _ = http(
            &a.control,
            "GET",
            "/status",
            Some("wrong-token-0123456789"),
            None,
        );
    }
    std::thread::sleep(Duration::from_millis(200));
    let text = std::fs::read_to_string(&log).unwrap();
    let lines = text
        .lines()
        .filter(|l| l.contains("refused a control request"))
        .count();
    assert!(
        (1..=10).contains(&lines),
        "{lines} refusal lines for 300 refusals"
    );
}

/// A "peer" that answers Ok without proving the token gets no application bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_cannot_prove_the_token_gets_nothing() {
    let scratch = Scratch::new("fakepeer");
    let agents = cluster(&scratch, 1, shape(None, 125e6), true).await;
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let fake_addr = fake.local_addr().unwrap();
    let received = Arc::new(Mutex::new(0usize));
    let got = received.clone();
    std::thread::spawn(move || {
        for c in fake.incoming() {
            let Ok(mut c) = c else { return };
            let got = got.clone();
            std::thread::spawn(move || {
                let mut header = [0u8; 8];
                if c.read_exact(&mut header).is_err() {
                    return;
                }
                let len = u16::from_be_bytes([header[6], header[7]]) as usize;
                let mut body = vec![0u8; len];
                let _ = c.read_exact(&mut body);
                // "Ok" in this version, without the challenge.
                let mut ok = *b"THRR\x00\x00\x00\x00";
                ok[4] = throttle_proto::wire::VERSION;
                let _ = c.write_all(&ok);
                let mut buf = [0u8; 4096];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    *got.lock().unwrap() += n;
                }
            });
        }
    });
    let mut nodes = agents[0].state.directory.nodes();
    nodes.push(throttle_agent::directory::NodeEntry {
        name: n("n3"),
        data: fake_addr,
    });
    agents[0].state.directory.set_nodes(&nodes);
    let addr = agents[0].control_addr.to_string();
    tokio::task::spawn_blocking(move || {
        let (code, body) = http(
            &addr,
            "POST",
            "/calibrate",
            Some(TOKEN),
            Some(r#"{"to":"n3","seconds":0.5}"#),
        );
        assert_eq!(code, 502, "{body}");
        assert!(body.contains("without proving"), "{body}");
    })
    .await
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        *received.lock().unwrap(),
        0,
        "bytes went to a peer without the token"
    );
}

/// A refused launch changes nothing (the rank map of the running job stays), one launch
/// cannot start more ranks than a node allows, and relaunching a finished job leaves no
/// run directory behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_launches_change_nothing_and_run_directories_do_not_pile_up() {
    let scratch = Scratch::new("relaunch");
    let agents = cluster(&scratch, 1, shape(None, 125e6), true).await;
    let addr = agents[0].control_addr.to_string();
    let base = scratch.path("throttle-jobs-n0");
    tokio::task::spawn_blocking(move || {
        let long = r#"{"program":"throttle-selftest","args":["--sleep","30"],"ranks":["n0"]}"#;
        let (code, body) = http(&addr, "POST", "/jobs/r/launch", Some(TOKEN), Some(long));
        assert_eq!(code, 201, "{body}");
        let other = r#"{"program":"throttle-selftest","ranks":["n0","n0","n0"]}"#;
        let (code, body) = http(&addr, "POST", "/jobs/r/launch", Some(TOKEN), Some(other));
        assert_eq!(code, 409, "{body}");
        let (_, jobs) = http(&addr, "GET", "/jobs", Some(TOKEN), None);
        let v: serde_json::Value = serde_json::from_str(&jobs).unwrap();
        assert_eq!(v["jobs"]["r"], serde_json::json!(["n0"]), "{jobs}");
        let (code, _) = http(&addr, "DELETE", "/jobs/r", Some(TOKEN), None);
        assert_eq!(code, 204);
        let many = format!(
            r#"{{"program":"throttle-selftest","ranks":[{}]}}"#,
            vec!["\"n0\""; 1025].join(",")
        );
        let (code, body) = http(&addr, "POST", "/jobs/big/launch", Some(TOKEN), Some(&many));
        assert_eq!(code, 400, "{body}");
        // Three launches of one name, then DELETE: no run directory stays.
        let quick = r#"{"program":"throttle-selftest","ranks":["n0"]}"#;
        for _ in 0..3 {
            let (code, body) = http(&addr, "POST", "/jobs/re/launch", Some(TOKEN), Some(quick));
            assert_eq!(code, 201, "{body}");
            let start = Instant::now();
            loop {
                let (_, r) = http(&addr, "GET", "/jobs/re", Some(TOKEN), None);
                if r.contains("\"state\":\"succeeded\"") {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(20), "{r}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let (code, _) = http(&addr, "DELETE", "/jobs/re", Some(TOKEN), None);
        assert_eq!(code, 204);
        let left: Vec<_> = std::fs::read_dir(&base)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "run directories left: {left:?}");
    })
    .await
    .unwrap();
}

/// "hello" sent through a forward's listener at `at`, and what came back within 5 s
/// (`None`: reset or silence).
fn echo_through(at: std::net::SocketAddr) -> Option<[u8; 5]> {
    let mut c = std::net::TcpStream::connect(at).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"hello").ok()?;
    let mut back = [0u8; 5];
    c.read_exact(&mut back).ok().map(|_| back)
}

/// Finding: a token holder's forward (listening on 0.0.0.0) let anyone reach a service of
/// another node bound to 127.0.0.1 only, or its sshd. A forward now reaches the node's
/// own address and ports from 1024 up, listens on ports from 1024 up, unless the node's
/// operator opens them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwards_reach_no_loopback_only_service_and_no_system_port_unless_opened() {
    use throttle_agent::services::forward::{add, ForwardSpec};
    use throttle_proto::forward::HostPort;
    let scratch = Scratch::new("fwd-private");
    // The nodes' address is 127.0.0.2 (their control APIs on 127.0.0.1, as advised); the
    // service listens on 127.0.0.1 only.
    let agents = cluster_on(&scratch, 2, shape(None, 1e9), true, "127.0.0.2", false).await;
    let private = echo_server();
    let spec = |listen: &str, to: &str, target: &str| ForwardSpec {
        listen: listen.parse().unwrap(),
        to_node: n(to),
        target: HostPort::parse(target).unwrap(),
    };
    // On the node itself: refused at once, saying why.
    let e = add(&agents[1].state, spec("127.0.0.2:0", "n1", &private))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("loopback address") && e.contains("--open-forwards"),
        "{e}"
    );
    let e = add(&agents[1].state, spec("127.0.0.2:0", "n1", "127.0.0.2:22"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("port 22 is under 1024"), "{e}");
    let e = add(
        &agents[0].state,
        spec("127.0.0.2:81", "n1", "127.0.0.2:5201"),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("from 1024 up"), "{e}");
    // Through another node: the rule is taken (n0 cannot know n1's policy), and every
    // connection is refused by n1: reset, the service never answers.
    let fwd = add(&agents[0].state, spec("127.0.0.2:0", "n1", &private))
        .await
        .unwrap();
    let served = tokio::task::spawn_blocking(move || echo_through(fwd.listen))
        .await
        .unwrap();
    assert!(
        served.is_none(),
        "n1's loopback-only service answered through a forward"
    );
    // The node's operator opens them: the same service is reached.
    let open = Scratch::new("fwd-open");
    let agents = cluster_on(&open, 2, shape(None, 1e9), true, "127.0.0.2", true).await;
    let fwd = add(&agents[0].state, spec("127.0.0.2:0", "n1", &private))
        .await
        .unwrap();
    let served = tokio::task::spawn_blocking(move || echo_through(fwd.listen))
        .await
        .unwrap();
    assert_eq!(served, Some(*b"hello"));
    // Even opened, a forward never reaches the agent's own ports.
    let control = agents[1].control_addr.to_string();
    let e = add(&agents[1].state, spec("127.0.0.2:0", "n1", &control))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("the agent of node `n1` itself"), "{e}");
}

/// Issue 35, finding 3: a token holder made a root agent's forward listen on 127.0.0.1:P
/// and [::1]:P, another user's preload port: her programs, her agent down, sent their
/// connections where the forward led. A forward now listens on its node's address (or
/// another non-loopback address of the node), never on another loopback address nor on
/// every address, unless the operator opens forwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_takes_no_loopback_port_of_this_machine() {
    use throttle_agent::services::forward::{add, ForwardSpec};
    use throttle_proto::forward::HostPort;
    let spec = |listen: &str| ForwardSpec {
        listen: listen.parse().unwrap(),
        to_node: n("n1"),
        target: HostPort::parse("127.0.0.2:6000").unwrap(),
    };
    let scratch = Scratch::new("fwd-listen");
    let agents = cluster_on(&scratch, 2, shape(None, 1e9), true, "127.0.0.2", false).await;
    for listen in [
        "127.0.0.1:0",
        "[::1]:0",
        "0.0.0.0:0",
        "[::]:0",
        "127.0.0.3:0",
    ] {
        let e = add(&agents[0].state, spec(listen))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("loopback") || e.contains("every address"),
            "{listen}: {e}"
        );
    }
    assert!(add(&agents[0].state, spec("127.0.0.2:0")).await.is_ok());
    let open = Scratch::new("fwd-listen-open");
    let agents = cluster_on(&open, 2, shape(None, 1e9), true, "127.0.0.2", true).await;
    assert!(add(&agents[0].state, spec("127.0.0.1:0")).await.is_ok());
}

/// Issue 35, finding 11: two forwards pointing at each other turned one client connection
/// into 1,415 chained ones. A forward's target may not be another forward's listener: the
/// first hop is refused, and the other forward never carries a connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwards_pointing_at_each_other_carry_nothing_round() {
    use throttle_agent::services::forward::{add, ForwardSpec};
    use throttle_proto::forward::HostPort;
    let scratch = Scratch::new("fwd-loop");
    let agents = cluster_on(&scratch, 2, shape(None, 1e9), true, "127.0.0.2", true).await;
    let spec = |to: &str, target: &str| ForwardSpec {
        listen: "127.0.0.2:0".parse().unwrap(),
        to_node: n(to),
        target: HostPort::parse(target).unwrap(),
    };
    let placeholder = echo_server();
    // n1's forward to n0 (its target changed below by a second rule), n0's to n1's.
    let on_n1 = add(&agents[1].state, spec("n0", &placeholder))
        .await
        .unwrap();
    let on_n0 = add(&agents[0].state, spec("n1", &on_n1.listen.to_string()))
        .await
        .unwrap();
    let back = add(&agents[1].state, spec("n0", &on_n0.listen.to_string()))
        .await
        .unwrap();
    let listen = on_n0.listen;
    let served = tokio::task::spawn_blocking(move || echo_through(listen))
        .await
        .unwrap();
    assert!(served.is_none(), "a connection went round the forwards");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let carried = |a: &throttle_agent::state::Agent, id: u64| {
        a.forwards
            .list()
            .into_iter()
            .find(|f| f.id == id)
            .map(|f| f.connections)
            .unwrap()
    };
    assert_eq!(carried(&agents[0].state, on_n0.id), 1);
    assert_eq!(
        carried(&agents[1].state, on_n1.id),
        0,
        "n1's forward was entered"
    );
    assert_eq!(carried(&agents[1].state, back.id), 0);
}

/// Issue 25, finding 3: trust by source address. Another user on the controller's host
/// (the address that presented the token, so the reserve is open to it too) held every
/// control place, and any user on a node filled a peer's data-port handshake pool. The
/// pools now evict their oldest unproven connection for a newcomer.
#[test]
fn a_flood_from_a_trusted_address_cannot_lock_out_clients_that_prove_themselves() {
    let scratch = Scratch::new("trustflood");
    let a = spawn_agent_with(&scratch, "n0", &[], Some(1024));
    // The controller on 127.0.0.1 presents the token: 127.0.0.1 is trusted from now on.
    let (code, _) = http(&a.control, "GET", "/status", Some(TOKEN), None);
    assert_eq!(code, 200);
    // Another user on the same host: idle connections from the same address, more than
    // the pool and its reserve; and the same on the data port (127.0.0.1 is this node's
    // data address, a cluster node's address).
    let mut held = Vec::new();
    for _ in 0..200 {
        held.extend(connect_from("127.0.0.1", &a.control));
        held.extend(connect_from("127.0.0.1", &a.data));
    }
    assert!(
        held.len() >= 300,
        "the flood opened {} connections",
        held.len()
    );
    // Each flooding connection was admitted, or refused with an answer: wait for the
    // answers so that the flood is in place before the controller comes.
    std::thread::sleep(Duration::from_millis(300));
    let (code, body) = http_within(
        &a.control,
        "GET",
        "/status",
        Some(TOKEN),
        None,
        Duration::from_secs(3),
    );
    assert_eq!(
        code, 200,
        "the controller was locked out by its own host: {body}"
    );
    // A peer's handshake still gets an answer of its own (here: refusing the agent's own
    // name), not `Busy`.
    let mut d = std::net::TcpStream::connect(&a.data).unwrap();
    d.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let e = client::dial_peer(
        &mut d,
        &Token::new(TOKEN).unwrap(),
        &n("n0"),
        &n("n0"),
        PeerWant::Sink,
    )
    .unwrap_err();
    assert_eq!(
        e.code,
        Code::Forbidden,
        "a peer's handshake during the flood: {e}"
    );
    // Some of the flood was closed to make room, without an answer (a refusal answers).
    let closed = held
        .iter()
        .filter(|s| {
            let mut s: &std::net::TcpStream = s;
            s.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
            let mut b = [0u8; 64];
            match s.read(&mut b) {
                Ok(0) => true,
                Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
                Ok(_) => false,
            }
        })
        .count();
    assert!(closed >= 1, "nothing was evicted");
    drop(held);

    // Before the controller ever presented the token (a fresh agent: its address is not
    // trusted yet), the flood from its host holds that address's whole share; the
    // controller's connection takes the place of the flood's oldest.
    let b = spawn_agent_with(&Scratch::new("trustflood-b"), "n0", &[], Some(1024));
    let mut held = Vec::new();
    for _ in 0..100 {
        held.extend(connect_from("127.0.0.1", &b.control));
    }
    std::thread::sleep(Duration::from_millis(300));
    let (code, body) = http_within(
        &b.control,
        "GET",
        "/status",
        Some(TOKEN),
        None,
        Duration::from_secs(3),
    );
    assert_eq!(
        code, 200,
        "a controller not yet trusted was locked out by its own host: {body}"
    );
    drop(held);
}
