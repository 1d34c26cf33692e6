//! Whether a run's emulated links ran at their setting: the proof every run carries.
//!
//! Every answer the tool gives rests on one promise: at 30% a node's link carries 30% of
//! its capacity. The agents keep an account of their pacing and of their own CPU
//! (`throttle_proto::status::PacingStatus`, `AgentCpu`); a run's share is the difference
//! of two readings, one just before its ranks start and one when they have ended (they
//! also give the bytes the run moved through the agents: its traffic). A run
//! is **flagged** when, on any of its nodes,
//!
//! * a direction that was backlogged (data waiting for the link) carried less than 97% of
//!   its setting meanwhile: the agent fell further behind than its catch-up window and the
//!   link time was lost;
//! * the node delivered bursts (messages) more than 1 ms behind their schedule, by more
//!   than 3% of the run in all (and at least 10 ms): the run's time may be that much too
//!   long because of the emulator, not the link; or
//! * its pacing ran late: more than 1% of the departures it slept for (at least 3) left
//!   more than 10 ms after their time;
//! * with kernel-paced links, more than [`MAX_BEYOND_LINK_SHARE`] of what its paced
//!   sockets sent or received went beyond what its link carries at the setting (the
//!   agent holds their traffic to a token bucket of the link's rate at every read): the
//!   kernel let messages go faster than the link, which no retry changes (a connection's
//!   first ten segments leave unpaced, up to 64 KiB each on a loopback cluster, and so
//!   does a message's first burst after a pause: decision 0050).
//!
//! Each flag names its likely cause: an agent that also waited long for a CPU (more than
//! 3% of the run) was starved by other processes (busy-polling ranks are the usual ones);
//! one that did not was stopped (SIGSTOP) or the machine paused. The analysis leaves
//! flagged runs out (`analysis`), a sweep retries them like failed ones.

use anyhow::Result;
use serde::{Deserialize, Serialize};
use throttle_proto::status::{PacingStatus, Status};

use crate::cluster::agent_client::AgentClient;

/// A direction that carried less than this share of its setting while backlogged is short.
pub const MIN_BACKLOGGED_SHARE: f64 = 0.97;
/// Backlogged link time below which a direction's share is not judged (seconds): too
/// little to tell a shortfall from the catch-up window still open at the end.
const MIN_BACKLOG_SECONDS: f64 = 0.05;
/// A node whose late bursts add up to more than this share of the run, and at least
/// [`MIN_LATE_BURST_SECONDS`], is flagged.
pub const MAX_LATE_BURST_SHARE: f64 = 0.03;
const MIN_LATE_BURST_SECONDS: f64 = 0.01;
/// An agent that waited for a CPU longer than this share of the run was starved.
const STARVED_SHARE: f64 = 0.03;
/// Share of late departures (of at least [`MIN_LATE_DEPARTURES`]) that flags a run.
const MAX_LATE_SHARE: f64 = 0.01;
const MIN_LATE_DEPARTURES: u64 = 3;
/// Share of a node's kernel-paced traffic (either way) beyond its link above which a run
/// is flagged.
pub const MAX_BEYOND_LINK_SHARE: f64 = 0.05;

/// The counters of some nodes at one moment.
#[derive(Clone, Debug)]
pub struct Reading {
    at: std::time::Instant,
    nodes: Vec<Status>,
}

impl Reading {
    /// Read every client's agent; `Err` when one does not answer.
    pub fn take(clients: &[AgentClient]) -> Result<Reading> {
        let nodes = clients.iter().map(|c| c.status()).collect::<Result<_>>()?;
        Ok(Reading {
            at: std::time::Instant::now(),
            nodes,
        })
    }
}

/// One direction's share of a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DirectionFidelity {
    /// Link time scheduled at the set rate (seconds).
    pub busy_seconds: f64,
    /// The part of it for backlogged data.
    pub backlog_seconds: f64,
    /// Link time a backlog lost for good.
    pub lost_seconds: f64,
    /// Summed lateness of the bursts' last units.
    pub behind_seconds: f64,
    /// Bursts delivered more than 1 ms late, and their lateness beyond it.
    #[serde(default)]
    pub late_bursts: u64,
    #[serde(default)]
    pub late_burst_seconds: f64,
    /// Departures slept for, and how many of them left more than 10 ms late.
    pub waits: u64,
    pub late_waits: u64,
}

impl DirectionFidelity {
    /// The run's share of a direction's account: the difference of two readings, late
    /// departures judged by the account's own cutoff
    /// (`throttle_proto::pacing::LATE_WAIT_SECONDS`).
    fn between(a: &PacingStatus, b: &PacingStatus) -> DirectionFidelity {
        let d = |x: f64, y: f64| (y - x).max(0.0);
        let waits = b.waits.saturating_sub(a.waits);
        DirectionFidelity {
            busy_seconds: d(a.busy_seconds, b.busy_seconds),
            backlog_seconds: d(a.backlog_seconds, b.backlog_seconds),
            lost_seconds: d(a.lost_seconds, b.lost_seconds),
            behind_seconds: d(a.behind_seconds, b.behind_seconds),
            late_bursts: b.late_bursts.saturating_sub(a.late_bursts),
            late_burst_seconds: d(a.late_burst_seconds, b.late_burst_seconds),
            waits,
            late_waits: b.late_waits().saturating_sub(a.late_waits()).min(waits),
        }
    }

    /// The share of its setting the direction carried while backlogged, when there was
    /// enough backlog to tell.
    pub fn backlogged_share(&self) -> Option<f64> {
        let total = self.backlog_seconds + self.lost_seconds;
        (total >= MIN_BACKLOG_SECONDS).then(|| self.backlog_seconds / total)
    }
}

/// One node's share of a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeFidelity {
    pub node: String,
    /// Payload bytes its agent sent and received (the traffic-based projection's input).
    #[serde(default)]
    pub bytes_sent: u64,
    #[serde(default)]
    pub bytes_received: u64,
    pub egress: DirectionFidelity,
    pub ingress: DirectionFidelity,
    /// Seconds its threads waited for a CPU (run-queue delay).
    pub cpu_wait_seconds: f64,
    /// With kernel-paced links: the program sockets its agent paced meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelFidelity>,
}

/// A node's kernel-paced sockets during a run (`throttle_proto::status::KernelPacingStatus`,
/// the difference of two readings). Their bytes are counted in the node's
/// `bytes_sent`/`bytes_received` too.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct KernelFidelity {
    /// Sockets registered, and sockets between nodes that sent unpaced.
    pub registered: u64,
    pub unpaced: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Of those, the bytes beyond what the node's link carries at its setting
    /// (`throttle_proto::status::KernelPacingStatus::beyond_link_sent`).
    #[serde(default)]
    pub beyond_link_sent: u64,
    #[serde(default)]
    pub beyond_link_received: u64,
}

impl KernelFidelity {
    /// The larger share, of the two ways, of the bytes moved that went beyond the link.
    pub fn beyond_link_share(&self) -> f64 {
        let share = |over: u64, all: u64| {
            if all == 0 {
                0.0
            } else {
                over as f64 / all as f64
            }
        };
        share(self.beyond_link_sent, self.bytes_sent)
            .max(share(self.beyond_link_received, self.bytes_received))
    }
}

/// A run's proof: what every node's link and agent did during it, and the flags.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RunFidelity {
    /// Seconds between the two readings.
    pub seconds: f64,
    pub nodes: Vec<NodeFidelity>,
    /// Why the run cannot be trusted as a run at its setting; empty when it can.
    pub flags: Vec<String>,
}

impl RunFidelity {
    /// The most bytes any one node's link carried in one direction: the traffic on the
    /// run's busiest link (a master's, a broadcast root's), which the traffic projection
    /// uses where the nodes' traffic is uneven.
    /// `None` when no node counted a byte (proofs written before the per-node counts).
    pub fn busiest_link_bytes(&self) -> Option<u64> {
        self.nodes
            .iter()
            .map(|n| n.bytes_sent.max(n.bytes_received))
            .max()
            .filter(|&b| b > 0)
    }

    /// [`RunFidelity::busiest_link_bytes`] of a stored or exported proof (JSON); `None`
    /// when it does not parse.
    pub fn busiest_link_bytes_of(json: &str) -> Option<u64> {
        serde_json::from_str::<RunFidelity>(json)
            .ok()?
            .busiest_link_bytes()
    }

    /// The difference of two readings of the same nodes; `None` when they are not
    /// comparable (a node missing, or an agent restarted in between: counters went back).
    pub fn between(before: &Reading, after: &Reading) -> Option<RunFidelity> {
        if before.nodes.len() != after.nodes.len() {
            return None;
        }
        let seconds = after.at.saturating_duration_since(before.at).as_secs_f64();
        let mut nodes = Vec::new();
        for (a, b) in before.nodes.iter().zip(&after.nodes) {
            if a.node != b.node || b.uptime_seconds < a.uptime_seconds {
                return None;
            }
            let kernel = match (&a.kernel_pacing, &b.kernel_pacing) {
                (Some(x), Some(y)) => Some(KernelFidelity {
                    registered: y.registered.checked_sub(x.registered)?,
                    unpaced: y.unpaced.checked_sub(x.unpaced)?,
                    bytes_sent: y.bytes_sent.saturating_sub(x.bytes_sent),
                    bytes_received: y.bytes_received.saturating_sub(x.bytes_received),
                    beyond_link_sent: y.beyond_link_sent.saturating_sub(x.beyond_link_sent),
                    beyond_link_received: y
                        .beyond_link_received
                        .saturating_sub(x.beyond_link_received),
                }),
                (None, None) => None,
                // The agent changed its mode in between: a restart.
                _ => return None,
            };
            let (ks, kr) = kernel
                .as_ref()
                .map_or((0, 0), |k| (k.bytes_sent, k.bytes_received));
            nodes.push(NodeFidelity {
                node: a.node.to_string(),
                bytes_sent: b
                    .egress
                    .bytes
                    .checked_sub(a.egress.bytes)?
                    .saturating_add(ks),
                bytes_received: b
                    .ingress
                    .bytes
                    .checked_sub(a.ingress.bytes)?
                    .saturating_add(kr),
                egress: DirectionFidelity::between(&a.egress.pacing, &b.egress.pacing),
                ingress: DirectionFidelity::between(&a.ingress.pacing, &b.ingress.pacing),
                cpu_wait_seconds: (b.cpu.run_delay_seconds - a.cpu.run_delay_seconds).max(0.0),
                kernel,
            });
        }
        let mut run = RunFidelity {
            seconds,
            nodes,
            flags: Vec::new(),
        };
        run.flags = run.judge();
        Some(run)
    }

    /// Payload bytes the run's nodes sent and received through their agents, in all.
    pub fn traffic(&self) -> (u64, u64) {
        self.nodes.iter().fold((0, 0), |(s, r), n| {
            (
                s.saturating_add(n.bytes_sent),
                r.saturating_add(n.bytes_received),
            )
        })
    }

    /// Whether a node's kernel-paced traffic went beyond its link by more than
    /// [`MAX_BEYOND_LINK_SHARE`]: the program's messages, not the machine's load, so a
    /// retry would be flagged alike.
    pub fn beyond_link(&self) -> bool {
        self.nodes
            .iter()
            .filter_map(|n| n.kernel.as_ref())
            .any(|k| k.beyond_link_share() > MAX_BEYOND_LINK_SHARE)
    }

    pub fn flagged(&self) -> bool {
        !self.flags.is_empty()
    }

    /// The flags, joined (what the store and the tables show).
    pub fn summary(&self) -> Option<String> {
        self.flagged().then(|| self.flags.join("; "))
    }

    fn judge(&self) -> Vec<String> {
        // Each rule: (how bad, what) per node or direction; the worst is named.
        let mut short = Vec::new();
        let mut late_departures = Vec::new();
        let mut late_bursts = Vec::new();
        let mut unpaced = Vec::new();
        let mut beyond = Vec::new();
        for n in &self.nodes {
            if let Some(k) = n.kernel.as_ref() {
                let ways = [
                    ("sent", k.beyond_link_sent, k.bytes_sent),
                    ("received", k.beyond_link_received, k.bytes_received),
                ];
                let worst = ways
                    .into_iter()
                    .filter(|(_, _, all)| *all > 0)
                    .map(|(way, over, all)| (over as f64 / all as f64, way, over, all))
                    .max_by(|a, b| a.0.total_cmp(&b.0));
                if let Some((share, way, over, all)) = worst.filter(|w| w.0 > MAX_BEYOND_LINK_SHARE)
                {
                    beyond.push((
                        share,
                        format!(
                            "{}: {:.0}% of what its kernel-paced sockets {way} ({:.2} of {:.2} MB) went faster than its link carries at the setting: the kernel let messages past the link (it paces a connection from its tenth segment on, each up to 64 KiB on a loopback cluster, and lets a message's first burst go after a pause), so this program's times say little of this bandwidth in this mode: measure it with --links proxy (local up --links proxy) or on namespace hosts (docs/limits.md)",
                            n.node,
                            share * 100.0,
                            over as f64 / 1e6,
                            all as f64 / 1e6
                        ),
                    ));
                }
            }
            if let Some(k) = n.kernel.as_ref().filter(|k| k.unpaced > 0) {
                unpaced.push((
                    k.unpaced as f64,
                    format!(
                        "{}: {} of its sockets between nodes sent unpaced (its agent could not take or read them: throttle-preload's warning in the program's output says why)",
                        n.node, k.unpaced
                    ),
                ));
            }
            for (dir, d) in [("egress", &n.egress), ("ingress", &n.ingress)] {
                if let Some(share) = d.backlogged_share().filter(|s| *s < MIN_BACKLOGGED_SHARE) {
                    short.push((
                        1.0 - share,
                        format!(
                            "{} {dir} carried {:.1}% of its setting while backlogged ({:.0} ms of link time lost)",
                            n.node,
                            share * 100.0,
                            d.lost_seconds * 1e3
                        ),
                    ));
                }
                if d.late_waits >= MIN_LATE_DEPARTURES
                    && d.late_waits as f64 > MAX_LATE_SHARE * d.waits as f64
                {
                    late_departures.push((
                        d.late_waits as f64 / d.waits.max(1) as f64,
                        format!(
                            "{} {dir}: pacing ran late ({} of {} departures more than 10 ms late)",
                            n.node, d.late_waits, d.waits
                        ),
                    ));
                }
            }
            let late = n.egress.late_burst_seconds + n.ingress.late_burst_seconds;
            if self.seconds > 0.0
                && late > (MAX_LATE_BURST_SHARE * self.seconds).max(MIN_LATE_BURST_SECONDS)
            {
                late_bursts.push((
                    late,
                    format!(
                        "{} delivered {} bursts more than 1 ms late, {:.0} ms beyond that ({:.1}% of the run)",
                        n.node,
                        n.egress.late_bursts + n.ingress.late_bursts,
                        late * 1e3,
                        100.0 * late / self.seconds
                    ),
                ));
            }
        }
        let mut flags: Vec<String> = [
            (short, "directions"),
            (late_departures, "directions"),
            (late_bursts, "nodes"),
        ]
        .into_iter()
        .filter_map(|(mut found, what)| {
            found.sort_by(|a, b| b.0.total_cmp(&a.0));
            let more = found.len().saturating_sub(1);
            let (_, worst) = found.into_iter().next()?;
            Some(if more > 0 {
                format!("{worst} (and {more} more {what})")
            } else {
                worst
            })
        })
        .collect();
        if !flags.is_empty() {
            flags.push(self.cause());
        }
        // Not the agent's CPU: a socket it could not pace, and messages the kernel let
        // past the link, are flags of their own.
        for mut found in [unpaced, beyond] {
            found.sort_by(|a, b| b.0.total_cmp(&a.0));
            let more = found.len().saturating_sub(1);
            if let Some((_, worst)) = found.into_iter().next() {
                flags.push(if more > 0 {
                    format!("{worst} (and {more} more nodes)")
                } else {
                    worst
                });
            }
        }
        flags
    }

    /// Whether an agent of the run waited for a CPU for more than [`STARVED_SHARE`] of it:
    /// other processes (ranks that busy-poll, more ranks and agents than cores) took its
    /// core, and a lower link capacity would not give it back.
    pub fn starved(&self) -> bool {
        self.seconds > 0.0
            && self
                .nodes
                .iter()
                .any(|n| n.cpu_wait_seconds > STARVED_SHARE * self.seconds)
    }

    /// The likely cause of the run's shortfalls, as a flag of its own: the agents that
    /// waited long for a CPU were starved (on a shared machine a delay travels from one
    /// node's agent to the next); none waiting means a stop or a pause.
    fn cause(&self) -> String {
        let most = self
            .nodes
            .iter()
            .max_by(|a, b| a.cpu_wait_seconds.total_cmp(&b.cpu_wait_seconds));
        match most {
            Some(m) if self.seconds > 0.0 && m.cpu_wait_seconds > STARVED_SHARE * self.seconds => format!(
                "likely cause: the agent of {} waited {:.0} ms ({:.0}% of the run) for a CPU: starved by other processes (more ranks and agents than cores, or ranks that busy-poll: Open MPI --mca mpi_yield_when_idle 1; agents on cores of their own: local up --pin, throttle-agent --cpus; throttle-agent --priority)",
                m.node,
                m.cpu_wait_seconds * 1e3,
                100.0 * m.cpu_wait_seconds / self.seconds
            ),
            _ => "likely cause: no agent waited for a CPU meanwhile: an agent was stopped (SIGSTOP?) or the machine paused".into(),
        }
    }
}

/// One line on a run that was not flagged: the busiest direction's share of its setting
/// while backlogged, and the most any node delivered late.
pub fn brief(f: &RunFidelity) -> String {
    let kernel: Vec<&KernelFidelity> = f.nodes.iter().filter_map(|n| n.kernel.as_ref()).collect();
    if !kernel.is_empty() {
        let sockets: u64 = kernel.iter().map(|k| k.registered).sum();
        let sent: u64 = kernel.iter().map(|k| k.bytes_sent).sum();
        return format!(
            "kernel-paced links: {sockets} sockets paced, {:.1} MB sent on them, none unpaced",
            sent as f64 / 1e6
        );
    }
    let busiest = f
        .nodes
        .iter()
        .flat_map(|n| [(n, "egress", &n.egress), (n, "ingress", &n.ingress)])
        .max_by(|a, b| a.2.busy_seconds.total_cmp(&b.2.busy_seconds));
    let late = f
        .nodes
        .iter()
        .map(|n| n.egress.late_burst_seconds + n.ingress.late_burst_seconds)
        .fold(0.0, f64::max);
    match busiest {
        Some((n, dir, d)) if d.busy_seconds > 0.0 => format!(
            "busiest link {} {dir} {:.3} s busy, {}; bursts late beyond 1 ms: at most {:.0} ms on a node",
            n.node,
            d.busy_seconds,
            match d.backlogged_share() {
                Some(s) => format!("{:.1}% of its setting while backlogged", s * 100.0),
                None => "never backlogged long enough to judge its rate".into(),
            },
            late * 1e3
        ),
        _ => "no paced traffic".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_proto::status::{AgentCpu, DirectionStatus, LateBucket};
    use throttle_proto::{Name, Pct, Rate};

    fn status(node: &str, uptime: f64, egress: PacingStatus, cpu_wait: f64) -> Status {
        let dir = |pacing| DirectionStatus {
            bytes: 0,
            rate_bytes_per_sec: 0.0,
            pacing,
        };
        Status {
            node: Name::parse("node", node).unwrap(),
            version: "0".into(),
            pct: Pct::parse("30").unwrap(),
            capacity: Rate::parse("1Gbit").unwrap(),
            limit_bytes_per_sec: Some(37.5e6),
            latency_us: 0,
            shape_lease_left_s: None,
            egress: dir(egress),
            ingress: dir(PacingStatus::default()),
            open_streams: 0,
            registered_ranks: 0,
            jobs: 0,
            forwards: 0,
            running_jobs: 0,
            splice: true,
            uptime_seconds: uptime,
            refused_connections: 0,
            tls: false,
            cpu: AgentCpu {
                run_delay_seconds: cpu_wait,
                ..Default::default()
            },
            intercepted: None,
            kernel_pacing: None,
        }
    }

    fn reading(secs: u64, nodes: Vec<Status>) -> Reading {
        Reading {
            at: std::time::Instant::now() + std::time::Duration::from_secs(secs),
            nodes,
        }
    }

    /// A pacing account: backlogged and lost link time, departures (and how many on
    /// time), late bursts (and their seconds beyond 1 ms).
    fn pacing(backlog: f64, lost: f64, waits: u64, on_time: u64, late: (u64, f64)) -> PacingStatus {
        PacingStatus {
            busy_seconds: backlog,
            backlog_seconds: backlog,
            lost_seconds: lost,
            behind_seconds: late.1,
            late_bursts: late.0,
            late_burst_seconds: late.1,
            waits,
            late_seconds: 0.0,
            late_buckets: vec![LateBucket {
                le: 0.01,
                count: on_time,
            }],
        }
    }

    fn run(after: PacingStatus, cpu_wait: f64) -> RunFidelity {
        let a = reading(
            0,
            vec![status("n0", 1.0, pacing(0.0, 0.0, 0, 0, (0, 0.0)), 0.0)],
        );
        let b = reading(10, vec![status("n0", 11.0, after, cpu_wait)]);
        RunFidelity::between(&a, &b).unwrap()
    }

    #[test]
    fn kernel_paced_sockets_count_as_traffic_and_an_unpaced_one_is_flagged() {
        let kernel = |registered, unpaced, sent| {
            let mut s = status("n0", 1.0, PacingStatus::default(), 0.0);
            s.kernel_pacing = Some(throttle_proto::status::KernelPacingStatus {
                registered,
                unpaced,
                bytes_sent: sent,
                bytes_received: sent / 2,
                ..Default::default()
            });
            s
        };
        let before = reading(0, vec![kernel(2, 0, 1000)]);
        let clean = reading(10, vec![kernel(9, 0, 51_000)]);
        let f = RunFidelity::between(&before, &clean).unwrap();
        assert!(!f.flagged(), "{:?}", f.flags);
        assert_eq!(f.traffic(), (50_000, 25_000));
        assert!(brief(&f).contains("7 sockets paced"), "{}", brief(&f));
        let leaky = reading(10, vec![kernel(9, 1, 51_000)]);
        let f = RunFidelity::between(&before, &leaky).unwrap();
        assert_eq!(f.flags.len(), 1, "{:?}", f.flags);
        assert!(f.flags[0].contains("1 of its sockets between nodes sent unpaced"));
        // An agent that changed its mode in between is not compared.
        let proxy = reading(10, vec![status("n0", 11.0, PacingStatus::default(), 0.0)]);
        assert!(RunFidelity::between(&before, &proxy).is_none());
    }

    #[test]
    fn kernel_paced_traffic_beyond_the_link_is_flagged() {
        let kernel = |received: u64, beyond: u64| {
            let mut s = status("n0", 1.0, PacingStatus::default(), 0.0);
            s.kernel_pacing = Some(throttle_proto::status::KernelPacingStatus {
                registered: 2,
                bytes_sent: 1000,
                bytes_received: received,
                beyond_link_received: beyond,
                ..Default::default()
            });
            s
        };
        let before = reading(0, vec![kernel(0, 0)]);
        let within = reading(10, vec![kernel(1_000_000, 50_000)]);
        let f = RunFidelity::between(&before, &within).unwrap();
        assert!(!f.flagged(), "{:?}", f.flags);
        let beyond = reading(10, vec![kernel(1_000_000, 360_000)]);
        let f = RunFidelity::between(&before, &beyond).unwrap();
        assert_eq!(f.flags.len(), 1, "{:?}", f.flags);
        assert!(
            f.flags[0].starts_with("n0: 36% of what its kernel-paced sockets received (0.36 of 1.00 MB) went faster than its link carries"),
            "{}",
            f.flags[0]
        );
        assert!(f.flags[0].contains("--links proxy"), "{}", f.flags[0]);
        assert!(f.beyond_link(), "a retry would not help");
        let f = RunFidelity::between(&before, &within).unwrap();
        assert!(!f.beyond_link());
    }

    #[test]
    fn a_link_on_its_setting_is_not_flagged() {
        // 1% of the backlog lost, bursts late by 50 ms in 10 s: within the bounds.
        let f = run(pacing(8.0, 0.08, 1000, 995, (20, 0.05)), 0.5);
        assert!(!f.flagged(), "{:?}", f.flags);
        assert!((f.nodes[0].egress.backlog_seconds - 8.0).abs() < 1e-9);
        assert!(
            brief(&f).contains("99.0% of its setting while backlogged"),
            "{}",
            brief(&f)
        );
    }

    #[test]
    fn a_backlog_that_lost_link_time_to_a_starved_agent_is_flagged_with_its_cause() {
        let f = run(pacing(7.6, 2.4, 0, 0, (0, 0.0)), 2.0);
        assert_eq!(f.flags.len(), 2, "{:?}", f.flags);
        assert!(
            f.flags[0].contains("n0 egress carried 76.0%"),
            "{:?}",
            f.flags
        );
        assert!(
            f.flags[1].contains("n0 waited 2000 ms (20% of the run) for a CPU"),
            "{:?}",
            f.flags
        );
    }

    #[test]
    fn late_bursts_and_late_departures_of_a_stopped_agent_are_flagged_as_a_stop() {
        let f = run(pacing(0.5, 0.0, 10, 6, (3, 0.9)), 0.01);
        assert!(
            f.flags
                .iter()
                .any(|x| x.contains("delivered 3 bursts more than 1 ms late, 900 ms")),
            "{:?}",
            f.flags
        );
        assert!(
            f.flags.iter().any(|x| x.contains("4 of 10 departures")),
            "{:?}",
            f.flags
        );
        assert_eq!(f.flags.len(), 3, "{:?}", f.flags);
        assert!(f.flags[2].contains("SIGSTOP"), "{:?}", f.flags);
    }

    #[test]
    fn the_proof_carries_the_bytes_the_run_moved() {
        let mut a = status("n0", 1.0, PacingStatus::default(), 0.0);
        a.egress.bytes = 10;
        a.ingress.bytes = 20;
        let mut b = a.clone();
        b.uptime_seconds = 2.0;
        b.egress.bytes = 15;
        b.ingress.bytes = 29;
        let f = RunFidelity::between(&reading(0, vec![a.clone()]), &reading(1, vec![b.clone()]));
        assert_eq!(f.unwrap().traffic(), (5, 9));
        // A counter that went back: no proof, rather than a wrong one.
        a.uptime_seconds = 3.0;
        assert!(RunFidelity::between(&reading(0, vec![b]), &reading(1, vec![a])).is_none());
    }

    #[test]
    fn a_restarted_agent_or_another_node_makes_no_proof() {
        let a = reading(0, vec![status("n0", 100.0, PacingStatus::default(), 0.0)]);
        let b = reading(10, vec![status("n0", 5.0, PacingStatus::default(), 0.0)]);
        assert!(RunFidelity::between(&a, &b).is_none());
        let c = reading(10, vec![status("n1", 110.0, PacingStatus::default(), 0.0)]);
        assert!(RunFidelity::between(&a, &c).is_none());
    }

    #[test]
    fn too_little_backlog_is_not_judged() {
        let d = DirectionFidelity {
            backlog_seconds: 0.01,
            lost_seconds: 0.01,
            ..Default::default()
        };
        assert_eq!(d.backlogged_share(), None);
    }
}
