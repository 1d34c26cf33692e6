//! `GET /metrics`: the agent's status in the OpenMetrics text format, for Prometheus.
//!
//! Written with `prometheus-client` so that types, help texts, units and suffixes follow
//! the conventions (`promtool check metrics` passes): base units (bytes, seconds, ratios),
//! `_total` on counters, a unit suffix on everything that has one, and a build-info metric.
//! Every sample carries the node's name as a label.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use throttle_proto::status::{PacingStatus, Status};

/// OpenMetrics, for scrapers that ask for it (Prometheus does).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The classic text format, for everyone else (`curl`, `promtool check metrics`).
pub const TEXT_004: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The classic text format from OpenMetrics: counter families take their `_total` name,
/// info families become gauges named `_info`, and the `# UNIT` and `# EOF` lines go.
pub fn classic(openmetrics: &str) -> String {
    let mut kinds = std::collections::HashMap::new();
    for l in openmetrics.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            if let Some((name, kind)) = rest.split_once(' ') {
                kinds.insert(name.to_string(), kind.to_string());
            }
        }
    }
    let rename = |name: &str| match kinds.get(name).map(String::as_str) {
        Some("counter") => format!("{name}_total"),
        Some("info") => format!("{name}_info"),
        _ => name.to_string(),
    };
    let mut out = String::new();
    for l in openmetrics.lines() {
        if l.starts_with("# UNIT ") || l == "# EOF" {
            continue;
        }
        let line = if let Some(rest) = l.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            format!("# HELP {} {help}", rename(name))
        } else if let Some(rest) = l.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let kind = if kind == "info" { "gauge" } else { kind };
            format!("# TYPE {} {kind}", rename(name))
        } else {
            l.to_string()
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Direction {
    direction: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: String,
}

fn per_direction<M: Default + Clone>(
    egress: impl Fn(&M),
    ingress: impl Fn(&M),
) -> Family<Direction, M> {
    let f = Family::<Direction, M>::default();
    egress(&f.get_or_create(&Direction {
        direction: "egress".into(),
    }));
    ingress(&f.get_or_create(&Direction {
        direction: "ingress".into(),
    }));
    f
}

/// A seconds counter of each direction's pacing account.
fn seconds_per_direction(
    s: &Status,
    field: impl Fn(&PacingStatus) -> f64,
) -> Family<Direction, Counter<f64, AtomicU64>> {
    per_direction::<Counter<f64, AtomicU64>>(
        |c| {
            c.inc_by(field(&s.egress.pacing));
        },
        |c| {
            c.inc_by(field(&s.ingress.pacing));
        },
    )
}

fn gauge_f64(v: f64) -> Gauge<f64, AtomicU64> {
    let g = Gauge::<f64, AtomicU64>::default();
    g.set(v);
    g
}

fn gauge_i64(v: usize) -> Gauge {
    let g = Gauge::default();
    g.set(v as i64);
    g
}

fn counter_f64(v: f64) -> Counter<f64, AtomicU64> {
    let c = Counter::<f64, AtomicU64>::default();
    c.inc_by(v);
    c
}

fn counter(v: u64) -> Counter {
    let c = Counter::default();
    c.inc_by(v);
    c
}

/// The metrics of one status document.
pub fn render(s: &Status) -> String {
    let mut r = Registry::with_labels([("node".into(), s.node.to_string().into())].into_iter());
    register_traffic(&mut r, s);
    register_setting(&mut r, s);
    register_activity(&mut r, s);
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &r);
    out
}

/// What crossed the link and how well it was paced, per direction.
fn register_traffic(r: &mut Registry, s: &Status) {
    r.register_with_unit(
        "throttle_link_payload",
        "Payload bytes that crossed the emulated link",
        Unit::Bytes,
        per_direction::<Counter>(
            |c| {
                c.inc_by(s.egress.bytes);
            },
            |c| {
                c.inc_by(s.ingress.bytes);
            },
        ),
    );
    r.register_with_unit(
        "throttle_link_rate",
        "Payload rate over the last 250 ms",
        Unit::Other("bytes_per_second".into()),
        per_direction::<Gauge<f64, AtomicU64>>(
            |g| {
                g.set(s.egress.rate_bytes_per_sec);
            },
            |g| {
                g.set(s.ingress.rate_bytes_per_sec);
            },
        ),
    );
    r.register_with_unit(
        "throttle_link_busy",
        "Link time the pacer scheduled at the set rate (size / rate of every unit)",
        Unit::Seconds,
        seconds_per_direction(s, |p| p.busy_seconds),
    );
    r.register_with_unit(
        "throttle_link_backlog",
        "Link time scheduled for data that was already waiting (the link was backlogged)",
        Unit::Seconds,
        seconds_per_direction(s, |p| p.backlog_seconds),
    );
    r.register_with_unit(
        "throttle_link_lost",
        "Link time a backlog lost because the agent fell further behind than its catch-up window",
        Unit::Seconds,
        seconds_per_direction(s, |p| p.lost_seconds),
    );
    r.register_with_unit(
        "throttle_link_behind",
        "How late the last unit of each burst left its pacing departure, summed",
        Unit::Seconds,
        seconds_per_direction(s, |p| p.behind_seconds),
    );
    r.register(
        "throttle_pacing_waits",
        "Departures a copy loop slept for",
        per_direction::<Counter>(
            |c| {
                c.inc_by(s.egress.pacing.waits);
            },
            |c| {
                c.inc_by(s.ingress.pacing.waits);
            },
        ),
    );
    r.register_with_unit(
        "throttle_pacing_late",
        "Summed lateness of those departures",
        Unit::Seconds,
        seconds_per_direction(s, |p| p.late_seconds),
    );
}

/// The link's setting: capacity, the share in force, added latency.
fn register_setting(r: &mut Registry, s: &Status) {
    r.register_with_unit(
        "throttle_link_capacity",
        "Emulated link capacity per direction",
        Unit::Other("bytes_per_second".into()),
        gauge_f64(s.capacity.bytes_per_sec()),
    );
    r.register_with_unit(
        "throttle_link_bandwidth",
        "Share of the capacity in force (1 when unlimited)",
        Unit::Other("ratio".into()),
        gauge_f64(s.pct.percent().map(|p| p / 100.0).unwrap_or(1.0)),
    );
    r.register(
        "throttle_link_unlimited",
        "1 when shaping is off",
        gauge_i64(s.pct.is_unlimited() as usize),
    );
    r.register_with_unit(
        "throttle_link_latency",
        "Added one-way latency at egress",
        Unit::Seconds,
        gauge_f64(s.latency_us as f64 / 1e6),
    );
}

/// What the agent is doing: CPU wait, streams, ranks, jobs, refusals, interception,
/// uptime.
fn register_activity(r: &mut Registry, s: &Status) {
    r.register_with_unit(
        "throttle_agent_cpu_wait",
        "Time the agent's threads waited for a CPU (run-queue delay)",
        Unit::Seconds,
        counter_f64(s.cpu.run_delay_seconds),
    );
    r.register(
        "throttle_open_streams",
        "Streams crossing the link now",
        gauge_i64(s.open_streams),
    );
    r.register(
        "throttle_registered_ranks",
        "Ranks registered on this node",
        gauge_i64(s.registered_ranks),
    );
    r.register(
        "throttle_running_jobs",
        "Jobs with ranks running on this node",
        gauge_i64(s.running_jobs),
    );
    r.register(
        "throttle_refused_connections",
        "Connections refused because a limit was reached, or evicted unproven from a full pool",
        counter(s.refused_connections),
    );
    if let Some(i) = &s.intercepted {
        let f = Family::<Outcome, Counter>::default();
        for (outcome, v) in [
            ("outgoing", i.outgoing),
            ("incoming", i.incoming),
            ("failed", i.failed),
        ] {
            f.get_or_create(&Outcome {
                outcome: outcome.into(),
            })
            .inc_by(v);
        }
        r.register(
            "throttle_intercepted_connections",
            "Programs' connections carried by transparent interception (outgoing: from this node; incoming: delivered here; failed: the program saw a reset)",
            f,
        );
    }
    r.register_with_unit(
        "throttle_uptime",
        "Time since the agent started",
        Unit::Seconds,
        gauge_f64(s.uptime_seconds),
    );
    r.register(
        "throttle_build",
        "The agent's version",
        Info::new(vec![("version".to_string(), s.version.clone())]),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_proto::status::DirectionStatus;
    use throttle_proto::{Name, Pct, Rate};

    #[test]
    fn names_carry_units_and_counters_end_in_total() {
        let s = Status {
            node: Name::parse("node", "n0").unwrap(),
            version: "0.1.0".into(),
            pct: Pct::parse("25").unwrap(),
            capacity: Rate::parse("1Gbit").unwrap(),
            limit_bytes_per_sec: Some(31.25e6),
            latency_us: 50,
            shape_lease_left_s: None,
            egress: DirectionStatus {
                bytes: 1000,
                rate_bytes_per_sec: 5.0,
                pacing: throttle_proto::status::PacingStatus {
                    busy_seconds: 1.5,
                    backlog_seconds: 1.0,
                    lost_seconds: 0.5,
                    behind_seconds: 0.25,
                    late_bursts: 0,
                    late_burst_seconds: 0.0,
                    waits: 7,
                    late_seconds: 0.001,
                    late_buckets: vec![],
                },
            },
            ingress: DirectionStatus {
                bytes: 2000,
                rate_bytes_per_sec: 6.0,
                pacing: Default::default(),
            },
            open_streams: 3,
            registered_ranks: 1,
            jobs: 1,
            forwards: 0,
            running_jobs: 1,
            splice: true,
            uptime_seconds: 9.5,
            refused_connections: 4,
            tls: false,
            cpu: throttle_proto::status::AgentCpu {
                run_delay_seconds: 0.5,
                nice: Some(-10),
                realtime: Some(false),
            },
            intercepted: Some(throttle_proto::status::InterceptedStatus {
                outgoing: 3,
                incoming: 2,
                failed: 1,
                kernel: true,
                preload_port: None,
                not_proven: Vec::new(),
                outside: Vec::new(),
            }),
            kernel_pacing: None,
        };
        let text = render(&s);
        for line in [
            "throttle_link_payload_bytes_total{node=\"n0\",direction=\"egress\"} 1000",
            "throttle_link_rate_bytes_per_second{node=\"n0\",direction=\"ingress\"} 6.0",
            "throttle_link_capacity_bytes_per_second{node=\"n0\"} 125000000.0",
            "throttle_link_bandwidth_ratio{node=\"n0\"} 0.25",
            "throttle_link_latency_seconds{node=\"n0\"} 0.00005",
            "throttle_refused_connections_total{node=\"n0\"} 4",
            "throttle_build_info{node=\"n0\",version=\"0.1.0\"} 1",
            "throttle_intercepted_connections_total{node=\"n0\",outcome=\"failed\"} 1",
            "throttle_link_busy_seconds_total{node=\"n0\",direction=\"egress\"} 1.5",
            "throttle_link_behind_seconds_total{node=\"n0\",direction=\"egress\"} 0.25",
            "throttle_link_lost_seconds_total{node=\"n0\",direction=\"egress\"} 0.5",
            "throttle_pacing_waits_total{node=\"n0\",direction=\"egress\"} 7",
            "throttle_agent_cpu_wait_seconds_total{node=\"n0\"} 0.5",
            "# EOF",
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
        let classic = classic(&text);
        for line in [
            "# TYPE throttle_link_payload_bytes_total counter",
            "# HELP throttle_refused_connections_total Connections refused",
            "# TYPE throttle_build_info gauge",
            "throttle_build_info{node=\"n0\",version=\"0.1.0\"} 1",
        ] {
            assert!(classic.contains(line), "missing `{line}` in\n{classic}");
        }
        assert!(!classic.contains("# UNIT") && !classic.contains("# EOF"));
    }
}
