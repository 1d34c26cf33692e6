//! The control API and bad input: every refusal is a clear error and the agent keeps
//! serving afterwards.

mod common;

use std::io::{Read, Write};

use common::*;
use throttle_agent::transport::wire::{self, Code, PeerRequest, PeerWant, Request};
use throttle_proto::auth::Token;
use throttle_proto::os::rank_client as client;
use throttle_testkit::skip;

fn status_ok(addr: &str) {
    let (code, body) = http(addr, "GET", "/status", Some(TOKEN), None);
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["node"], "n0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_the_token_get_401() {
    let scratch = Scratch::new("auth");
    let agents = cluster(&scratch, 1, shape(Some(50.0), 125e6), true).await;
    let addr = agents[0].control_addr.to_string();
    tokio::task::spawn_blocking(move || {
        for path in ["/status", "/metrics", "/forwards", "/cluster", "/nope"] {
            let (code, body) = http(&addr, "GET", path, None, None);
            assert_eq!(code, 401, "{path}: {body}");
            assert!(body.contains("Authorization"), "{body}");
            let (code, _) = http(&addr, "GET", path, Some("wrong-token-0123456789"), None);
            assert_eq!(code, 401, "{path}");
        }
        let (code, _) = http(&addr, "PUT", "/shape", None, Some(r#"{"pct":1}"#));
        assert_eq!(code, 401);
        status_ok(&addr);
    })
    .await
    .unwrap();
    assert_eq!(agents[0].state.link.shape().pct().percent(), Some(50.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shape_is_set_and_bad_shapes_are_refused() {
    let scratch = Scratch::new("shape");
    let agents = cluster(&scratch, 1, shape(Some(50.0), 125e6), true).await;
    let addr = agents[0].control_addr.to_string();
    let link = agents[0].state.link.clone();
    tokio::task::spawn_blocking(move || {
        let (code, body) = http(
            &addr,
            "PUT",
            "/shape",
            Some(TOKEN),
            Some(r#"{"pct": 25, "latency_us": 100}"#),
        );
        assert_eq!(code, 200, "{body}");
        assert_eq!(link.shape().pct().percent(), Some(25.0));
        assert_eq!(link.shape().latency_us(), 100);
        let (code, _) = http(
            &addr,
            "PUT",
            "/shape",
            Some(TOKEN),
            Some(r#"{"pct": "unlimited"}"#),
        );
        assert_eq!(code, 200);
        assert_eq!(link.shape().pct().percent(), None);
        let (code, _) = http(
            &addr,
            "PUT",
            "/shape",
            Some(TOKEN),
            Some(r#"{"pct": 40, "capacity": "10Gbit"}"#),
        );
        assert_eq!(code, 200);
        assert_eq!(link.shape().capacity().bytes_per_sec(), 1.25e9);
        let before = link.shape();
        let bad = [
            (r#"{"pct": 0}"#, "0.01 to 100"),
            (r#"{"pct": -5}"#, "0.01 to 100"),
            (r#"{"pct": 100.5}"#, "0.01 to 100"),
            (r#"{"pct": "NaN"}"#, "0.01 to 100"),
            (r#"{"pct": "lots"}"#, "0.01 to 100"),
            (r#"{"pct": true}"#, "number"),
            (r#"{"capacity": -1}"#, "range"),
            (r#"{"capacity": "5Pbit"}"#, "not understood"),
            (r#"{"capacity": 1e30}"#, "range"),
            (r#"{"capacity": "fast"}"#, "1Gbit"),
            (r#"{"latency_us": -1}"#, "microseconds"),
            (r#"{"latency_us": 99999999999}"#, "maximum"),
            (r#"{"pct": 50, "burst": 3}"#, "unknown field"),
            (r#"{"pct": 50, "lease_s": 0.5}"#, "lease_s"),
            (r#"{"pct": 50, "lease_s": 1e9}"#, "lease_s"),
            (r#"{"pct": 50, "lease_s": -1}"#, "lease_s"),
            (r#"{"pct": 50"#, "expected JSON"),
            ("not json at all", "expected JSON"),
        ];
        for (body, hint) in bad {
            let (code, answer) = http(&addr, "PUT", "/shape", Some(TOKEN), Some(body));
            assert_eq!(code, 400, "{body} -> {answer}");
            let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
            let msg = v["error"].as_str().unwrap();
            assert!(msg.contains(hint), "{body}: `{msg}` lacks `{hint}`");
            assert_eq!(link.shape(), before, "a refused shape must change nothing");
        }
        // A lease: renewable while it holds; without one there is nothing to renew.
        let (code, answer) = http(&addr, "POST", "/shape/renew", Some(TOKEN), None);
        assert_eq!(code, 409, "{answer}");
        let (code, answer) = http(
            &addr,
            "PUT",
            "/shape",
            Some(TOKEN),
            Some(r#"{"pct": 10, "lease_s": 30}"#),
        );
        assert_eq!(code, 200, "{answer}");
        let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert!(v["shape_lease_left_s"].as_f64().unwrap() > 29.0, "{answer}");
        let (code, answer) = http(&addr, "POST", "/shape/renew", Some(TOKEN), None);
        assert_eq!(code, 200, "{answer}");
        let (code, _) = http(&addr, "PUT", "/shape", Some(TOKEN), Some(r#"{"pct": 40}"#));
        assert_eq!(code, 200);
        let (code, _) = http(&addr, "POST", "/shape/renew", Some(TOKEN), None);
        assert_eq!(code, 409, "a change without a lease ends it");
        let (code, _) = http(&addr, "PUT", "/status", Some(TOKEN), Some("{}"));
        assert_eq!(code, 405);
        let (code, _) = http(&addr, "GET", "/nothing-here", Some(TOKEN), None);
        assert_eq!(code, 404);
        status_ok(&addr);
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text() {
    let scratch = Scratch::new("metrics");
    let agents = cluster(&scratch, 1, shape(Some(50.0), 125e6), true).await;
    let addr = agents[0].control_addr.to_string();
    let body =
        tokio::task::spawn_blocking(move || http(&addr, "GET", "/metrics", Some(TOKEN), None))
            .await
            .unwrap()
            .1;
    assert!(
        body.contains("# TYPE throttle_link_payload_bytes_total counter"),
        "{body}"
    );
    assert!(
        body.contains(r#"throttle_link_bandwidth_ratio{node="n0"} 0.5"#),
        "{body}"
    );
    assert!(body.contains(r#"throttle_link_capacity_bytes_per_second{node="n0"} 125000000"#));
    // `promtool check metrics` (Prometheus's own linter) accepts the exposition.
    let promtool = std::env::var("PROMTOOL").unwrap_or_else(|_| "promtool".into());
    match std::process::Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Err(_) => skip(
            "metrics (its promtool check)",
            &format!("`{promtool}` (Prometheus's promtool: `sudo .ci/packages` puts it in /usr/local/bin; or set PROMTOOL)"),
            "THROTTLE_REQUIRE_NETNS",
        ),
        Ok(mut child) => {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(body.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "promtool: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwards_jobs_and_cluster_validate_their_input() {
    let scratch = Scratch::new("rules");
    let agents = cluster(&scratch, 2, shape(Some(50.0), 125e6), true).await;
    let addr = agents[0].control_addr.to_string();
    tokio::task::spawn_blocking(move || {
        let cases = [
            (
                "POST",
                "/forwards",
                r#"{"listen":"127.0.0.1:0","to_node":"n9","target":"127.0.0.1:1"}"#,
                422,
                "n9",
            ),
            (
                "POST",
                "/forwards",
                r#"{"listen":"nowhere","to_node":"n1","target":"127.0.0.1:1"}"#,
                400,
                "IP:PORT",
            ),
            (
                "POST",
                "/forwards",
                r#"{"listen":"127.0.0.1:0","to_node":"n1","target":"host"}"#,
                400,
                "HOST:PORT",
            ),
            (
                "POST",
                "/forwards",
                r#"{"listen":"127.0.0.1:0"}"#,
                400,
                "missing field",
            ),
            ("PUT", "/jobs/j", r#"{"ranks":["n0","n7"]}"#, 422, "n7"),
            ("PUT", "/jobs/j", r#"{"ranks":[]}"#, 400, "ranks"),
            ("DELETE", "/jobs/nope", "", 404, "nope"),
            ("DELETE", "/forwards/abc", "", 400, "number"),
            ("DELETE", "/forwards/42", "", 404, "42"),
            (
                "PUT",
                "/cluster",
                r#"{"nodes":[{"name":"n1","data":"127.0.0.1:1"}]}"#,
                400,
                "own node",
            ),
            (
                "PUT",
                "/cluster",
                r#"{"nodes":[{"name":"n0","data":"x"}]}"#,
                400,
                "IP:PORT",
            ),
            ("POST", "/calibrate", r#"{"to":"n9"}"#, 422, "n9"),
            (
                "POST",
                "/calibrate",
                r#"{"to":"n1","seconds":1e9}"#,
                400,
                "seconds",
            ),
        ];
        for (method, path, body, want, hint) in cases {
            let (code, answer) = http(&addr, method, path, Some(TOKEN), Some(body));
            assert_eq!(code, want, "{method} {path} {body} -> {answer}");
            assert!(
                answer.contains(hint),
                "{method} {path}: `{answer}` lacks `{hint}`"
            );
        }
        // And the good forms work.
        let (code, body) = http(
            &addr,
            "POST",
            "/forwards",
            Some(TOKEN),
            Some(r#"{"listen":"127.0.0.1:0","to_node":"n1","target":"127.0.0.1:9"}"#),
        );
        assert_eq!(code, 201, "{body}");
        let id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["id"]
            .as_u64()
            .unwrap();
        let (code, _) = http(
            &addr,
            "DELETE",
            &format!("/forwards/{id}"),
            Some(TOKEN),
            None,
        );
        assert_eq!(code, 204);
        let (code, _) = http(
            &addr,
            "PUT",
            "/jobs/j",
            Some(TOKEN),
            Some(r#"{"ranks":["n0","n1"]}"#),
        );
        assert_eq!(code, 200);
        status_ok(&addr);
    })
    .await
    .unwrap();
}

/// Send raw bytes to the local endpoint, return the reply code.
fn local_request(socket: &std::path::Path, bytes: &[u8]) -> Code {
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.write_all(bytes).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    wire::read_reply_blocking(&mut s)
        .map(|r| r.code)
        .unwrap_or_else(|e| e.code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_handshakes_get_error_codes_and_the_agent_keeps_serving() {
    let scratch = Scratch::new("hs");
    let agents = cluster(&scratch, 2, shape(Some(50.0), 125e6), true).await;
    set_job(&agents, "j", &["n0", "n1"]);
    let s0 = agents[0].local_socket.clone();
    let data1 = agents[1].data_addr.to_string();
    let control = agents[0].control_addr.to_string();
    // n1 is told of a node n2 whose agent does not exist.
    let mut nodes = agents[0].state.directory.nodes();
    nodes.push(throttle_agent::directory::NodeEntry {
        name: n("n2"),
        data: "127.0.0.1:9".parse().unwrap(),
    });
    agents[0].state.directory.set_nodes(&nodes);
    set_job(&agents, "dead", &["n0", "n2"]);
    tokio::task::spawn_blocking(move || {
        assert_eq!(
            local_request(&s0, b"GET / HTTP/1.1\r\n\r\n"),
            Code::BadMagic
        );
        let mut v1 = Request::OpenRank {
            job: n("j"),
            src_rank: 0,
            dst_rank: 1,
        }
        .encode();
        v1[4] = 1;
        assert_eq!(local_request(&s0, &v1), Code::BadVersion);
        let trunc = Request::OpenRank {
            job: n("j"),
            src_rank: 0,
            dst_rank: 1,
        }
        .encode();
        assert_eq!(
            local_request(&s0, &trunc[..trunc.len() - 2]),
            Code::Malformed
        );
        assert_eq!(local_request(&s0, b"THRT"), Code::Malformed);
        let e = client::open_rank(&s0, &n("nojob"), 0, 1).unwrap_err();
        assert_eq!(e.code, Code::UnknownJob);
        assert!(e.message.contains("nojob"));
        assert_eq!(
            client::open_rank(&s0, &n("j"), 0, 5).unwrap_err().code,
            Code::UnknownRank
        );
        assert_eq!(
            client::open_rank(&s0, &n("j"), 9, 1).unwrap_err().code,
            Code::UnknownRank
        );
        let e = client::open_rank(&s0, &n("dead"), 0, 1).unwrap_err();
        assert_eq!(e.code, Code::PeerUnreachable, "{e}");
        assert!(e.message.contains("n2"), "{e}");
        // A destination rank that never registers.
        let e = client::open_rank(&s0, &n("j"), 0, 1).unwrap_err();
        assert_eq!(e.code, Code::RankNotRegistered, "{e}");
        assert!(client::register(&s0, &n("j"), 0, "nonsense")
            .unwrap_err()
            .message
            .contains("unix:"));
        // Agent-to-agent requests on the local endpoint, and vice versa.
        let peer = Request::Peer(PeerRequest {
            src_node: n("n1"),
            nonce: [0; 32],
            want: PeerWant::Sink,
        })
        .encode();
        assert_eq!(local_request(&s0, &peer), Code::Malformed);
        let mut d = std::net::TcpStream::connect(&data1).unwrap();
        d.write_all(
            &Request::OpenRank {
                job: n("j"),
                src_rank: 0,
                dst_rank: 1,
            }
            .encode(),
        )
        .unwrap();
        assert_eq!(
            wire::read_reply_blocking(&mut d).unwrap().code,
            Code::Malformed
        );
        // A dialer with the wrong token learns that the agent's proof does not match its
        // token, and the agent refuses a wrong proof.
        let wrong = Token::new("bad-token-0123456789").unwrap();
        let mut d = std::net::TcpStream::connect(&data1).unwrap();
        let e = client::dial_peer(&mut d, &wrong, &n("n0"), &n("n1"), PeerWant::Sink).unwrap_err();
        assert_eq!(e.code, Code::Unauthorized, "{e}");
        let mut d = std::net::TcpStream::connect(&data1).unwrap();
        d.write_all(&peer).unwrap();
        assert!(matches!(
            wire::read_answer_blocking(&mut d).unwrap(),
            wire::Answer::Challenge(_)
        ));
        d.write_all(&[0u8; 32]).unwrap();
        assert_eq!(
            wire::read_reply_blocking(&mut d).unwrap().code,
            Code::Unauthorized
        );
        // Garbage on the data port, then a peer that hangs up mid-header.
        let mut d = std::net::TcpStream::connect(&data1).unwrap();
        d.write_all(&[0xff; 100]).unwrap();
        assert_eq!(
            wire::read_reply_blocking(&mut d).unwrap().code,
            Code::BadMagic
        );
        let mut d = std::net::TcpStream::connect(&data1).unwrap();
        d.write_all(b"THR").unwrap();
        d.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        let _ = d.read_to_end(&mut rest);
        // Forward target that refuses (a free port: nothing listens there).
        let token = Token::new(TOKEN).unwrap();
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = free.local_addr().unwrap().to_string();
        drop(free);
        let forward_to = |target: &str| {
            let mut d = std::net::TcpStream::connect(&data1).unwrap();
            client::dial_peer(
                &mut d,
                &token,
                &n("n0"),
                &n("n1"),
                PeerWant::Forward {
                    target: target.into(),
                },
            )
            .unwrap_err()
        };
        let e = forward_to(&closed);
        assert_eq!(e.code, Code::TargetUnreachable, "{e}");
        // A system port is refused before any connect.
        let e = forward_to("127.0.0.1:9");
        assert_eq!(e.code, Code::Forbidden, "{e}");
        status_ok(&control);
    })
    .await
    .unwrap();
}
