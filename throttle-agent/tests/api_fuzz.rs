//! Property tests of the control API's request bodies and paths (the fuzz target CI runs
//! for a bounded time; `PROPTEST_CASES=100000 cargo test --test api_fuzz` runs longer).
//!
//! Whatever arrives, the agent answers: never a panic, never a 500; every refusal is JSON
//! with an `error` message; a refused shape changes nothing. Requests go through the real
//! router (authentication and error layers included), in process. The agent may launch
//! nothing here, so a generated launch that happens to be valid starts no process.

mod common;

use std::sync::OnceLock;

use axum::body::Body;
use axum::http::{Method, Request};
use proptest::prelude::*;
use serde_json::Value;
use throttle_agent::agent::{self, AgentConfig, RunningAgent};
use throttle_agent::launch::programs::ProgramPolicy;
use throttle_agent::transport::pump::PumpOptions;
use throttle_proto::auth::Token;
use tower::ServiceExt;

use common::*;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    agent: RunningAgent,
    _scratch: Scratch,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let scratch = Scratch::new("fuzz");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let config = AgentConfig {
            node: n("n0"),
            control: "127.0.0.1:0".parse().unwrap(),
            data: "127.0.0.1:0".parse().unwrap(),
            local_socket: scratch.path("n0.sock"),
            shape: shape(Some(50.0), 125e6),
            token: Token::new(TOKEN).unwrap(),
            peers: vec![],
            forwards: vec![],
            pump: PumpOptions::default(),
            register_timeout: std::time::Duration::from_millis(100),
            catch_up: throttle_agent::link::pacer::DEFAULT_CATCH_UP,
            programs: ProgramPolicy::nothing(),
            tls: None,
            intercept: false,
            open_forwards: false,
            preload_port: None,
            kernel_links: false,
            egress_device: None,
            rank_cpus: None,
            intercept_within: vec![],
        };
        let agent = runtime.block_on(agent::start(config)).unwrap();
        Fixture {
            runtime,
            agent,
            _scratch: scratch,
        }
    })
}

const WORDS: &[&str] = &[
    "",
    "n0",
    "n1",
    "..",
    "../x",
    "a/b",
    "unlimited",
    "off",
    "1Gbit",
    "125MB",
    "fast",
    "throttle-selftest",
    "throttle-agent",
    "/bin/sh",
    "LD_PRELOAD",
    "OMP_NUM_THREADS",
    "127.0.0.1:0",
    "127.0.0.1:9",
    "198.18.0.9:80",
    "x:99999",
    "é\u{0}\u{7f}",
];

const KEYS: &[&str] = &[
    "pct",
    "capacity",
    "latency_us",
    "nodes",
    "name",
    "data",
    "ranks",
    "program",
    "args",
    "env",
    "time_limit_s",
    "lease_s",
    "listen",
    "to_node",
    "target",
    "to",
    "seconds",
    "extra",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![
            any::<f64>(),
            -1.0..200.0f64,
            Just(1e-25),
            Just(0.01),
            Just(1e300)
        ]
        .prop_map(|f| serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null)),
        prop::sample::select(WORDS).prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(prop::sample::select(KEYS), inner, 0..6).prop_map(|m| {
                Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

fn target() -> impl Strategy<Value = (Method, String)> {
    let job = prop_oneof![
        prop::sample::select(&["j1", "..", ".", "%2e%2e", "a%2Fb", "%ff", "x%00y"][..])
            .prop_map(str::to_string),
        "[a-z0-9.%_-]{0,20}",
    ];
    (0usize..13, job).prop_map(|(k, job)| match k {
        0 => (Method::PUT, "/shape".to_string()),
        1 => (Method::PUT, "/cluster".to_string()),
        2 => (Method::PUT, format!("/jobs/{job}")),
        3 => (Method::POST, format!("/jobs/{job}/launch")),
        4 => (Method::POST, format!("/jobs/{job}/renew")),
        5 => (Method::DELETE, format!("/jobs/{job}")),
        6 => (Method::GET, format!("/jobs/{job}")),
        7 => (Method::POST, "/forwards".to_string()),
        8 => (Method::DELETE, format!("/forwards/{job}")),
        9 => (Method::POST, "/calibrate".to_string()),
        10 => (Method::PATCH, "/status".to_string()),
        11 => (Method::GET, format!("/{job}")),
        _ => (Method::GET, "/jobs".to_string()),
    })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        json().prop_map(|v| v.to_string().into_bytes()),
        prop::collection::vec(any::<u8>(), 0..200),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(768)
    ))]

    #[test]
    fn every_request_gets_a_clear_answer(
        (method, path) in target(),
        body in body(),
        with_token in prop::bool::weighted(0.95),
    ) {
        let f = fixture();
        let state = f.agent.state.clone();
        let before = state.link.shape();
        let mut req = Request::builder().method(method.clone()).uri(&path);
        if with_token {
            req = req.header("authorization", format!("Bearer {TOKEN}"));
        }
        let Ok(req) = req.body(Body::from(body.clone())) else {
            // The path is not a valid URI: hyper would refuse it before the router.
            return Ok(());
        };
        let router = throttle_agent::api::router(state.clone());
        let (status, bytes) = f.runtime.block_on(async move {
            let resp = router.oneshot(req).await.unwrap();
            let status = resp.status();
            (status, axum::body::to_bytes(resp.into_body(), 1 << 22).await.unwrap())
        });
        prop_assert!(
            status.as_u16() < 500 || status.as_u16() == 502,
            "{method} {path} {:?} -> {status}: {}",
            String::from_utf8_lossy(&body),
            String::from_utf8_lossy(&bytes)
        );
        if status.as_u16() >= 400 {
            let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                TestCaseError::fail(format!("{method} {path} -> {status}: not JSON: {e}"))
            })?;
            prop_assert!(v["error"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
            if path == "/shape" {
                prop_assert_eq!(state.link.shape(), before, "a refused shape changed the link");
            }
        } else if status.as_u16() != 204 {
            prop_assert!(serde_json::from_slice::<Value>(&bytes).is_ok() || path == "/metrics");
        }
        // Put the shape back for the next case.
        state.link.set(before);
    }
}
