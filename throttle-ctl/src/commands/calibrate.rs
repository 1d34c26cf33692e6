//! `throttle-ctl calibrate`: what each link really carries, against what it should.
//!
//! For every node, traffic is sent to the next node (a ring) twice: once at 100% of the
//! configured capacity (what the emulation achieves) and once unlimited (what this host
//! can carry at all). Then every node sends to the next at once, unlimited: what each link
//! gets when all are busy, as in a run; a quarter of the least of them is the capacity
//! suggested for runs whose ranks share the machine with the agents. Every shape is set
//! through a [`LinkLease`] and released after each measurement, also when one fails: each
//! agent goes back to its shape before, or to the one its operator reloaded meanwhile.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::Args as ClapArgs;
use serde::Serialize;
use throttle_analysis::table::Table;
use throttle_proto::rate::format_bits_per_sec;
use throttle_proto::shape::ShapeChange;
use throttle_proto::{Lease, Name, Pct};

use super::{Context, Exit};
use crate::cluster::agent_client::AgentClient;
use crate::cluster::Cluster;
use crate::link_lease::LinkLease;
use crate::output;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Seconds per measurement (0.1 to 60).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Seconds the agents keep a measurement's shape without hearing from this command
    /// (it renews them); if throttle-ctl is killed, each link goes back to what it was
    /// this long after.
    #[arg(long, default_value_t = Lease::DEFAULT)]
    lease: Lease,
    /// Print the measured rates as JSON on standard output instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
pub struct LinkCalibration {
    pub from: Name,
    pub to: Name,
    pub capacity_bytes_per_sec: f64,
    /// Goodput at pct = 100.
    pub achieved_bytes_per_sec: f64,
    /// achieved / capacity - 1.
    pub error: f64,
    /// Goodput with shaping off: what the host can carry.
    pub host_max_bytes_per_sec: f64,
    pub warning: Option<String>,
}

/// What `calibrate` found: each link alone, every link at once, and the capacity it
/// suggests.
#[derive(Debug, Serialize)]
pub struct Calibrated {
    pub links: Vec<LinkCalibration>,
    /// Goodput of each link (in `links`' order) unlimited, with every node sending to the
    /// next at once.
    pub together_bytes_per_sec: Vec<f64>,
    /// A quarter of the least of `together_bytes_per_sec`, rounded down to 1, 2 or 5
    /// times a power of ten: a capacity this machine carries on every link at once with
    /// room left for the ranks.
    pub suggested_capacity_bytes_per_sec: f64,
    /// The same as `local up --capacity` takes it (`200Mbit`).
    pub suggested_capacity: String,
}

impl Args {
    pub fn exec(self, ctx: &Context) -> Exit {
        if !(self.seconds.is_finite() && (0.1..=60.0).contains(&self.seconds)) {
            anyhow::bail!("--seconds must be between 0.1 and 60");
        }
        let cluster = ctx.cluster()?;
        let links = calibrate(&cluster, self.seconds, self.lease, |m| {
            crate::note!("calibrating {m}")
        })?;
        crate::note!(
            "calibrating every link at once: unlimited for {} s",
            self.seconds
        );
        let together = together(&cluster, self.seconds, self.lease)?;
        let suggested = suggest(&together);
        let results = Calibrated {
            links,
            together_bytes_per_sec: together,
            suggested_capacity_bytes_per_sec: suggested,
            suggested_capacity: throttle_proto::rate::format_flag(suggested),
        };
        if self.json {
            output::print_json(&results)?;
        } else {
            output::print(render(&results, cluster.file.capacity.bytes_per_sec()))?;
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Every node sends to the next at once, unlimited, for `seconds`: each link's goodput,
/// in the nodes' order. Every node is released afterwards (back to its shape before, or
/// to what its operator reloaded meanwhile), also when a measurement fails.
pub fn together(cluster: &Cluster, seconds: f64, lease: Lease) -> Result<Vec<f64>> {
    let nodes = &cluster.file.nodes;
    if nodes.len() < 2 {
        anyhow::bail!("calibration needs at least two nodes (same-node traffic is not shaped)");
    }
    crate::cluster::directory::ensure(cluster, nodes)?;
    let timeout = Duration::from_secs_f64(seconds * 2.0 + 20.0);
    let clients: Vec<AgentClient> = nodes
        .iter()
        .map(|n| AgentClient::with_timeout(cluster, n, timeout))
        .collect();
    // Put back when released or dropped: after the measurement, an error, or a panic.
    let links = LinkLease::hold(cluster, lease);
    let every: Vec<usize> = (0..nodes.len()).collect();
    let opened = links
        .set(
            &every,
            ShapeChange {
                pct: Some(Pct::UNLIMITED),
                capacity: None,
                latency_us: Some(0),
                lease_s: None,
            },
        )
        .map(drop);
    let measured = opened.and_then(|()| {
        std::thread::scope(|scope| {
            let runs: Vec<_> = clients
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let to = &nodes[(i + 1) % nodes.len()].name;
                    scope.spawn(move || c.calibrate(to, seconds))
                })
                .collect();
            runs.into_iter()
                .map(|r| match r.join() {
                    Ok(m) => m.map(|m| m.achieved_bytes_per_sec),
                    Err(_) => Err(anyhow::anyhow!("a measurement's thread panicked")),
                })
                .collect::<Result<Vec<f64>>>()
        })
    });
    let measured = measured.and_then(|m| held(&links).map(|()| m));
    // The agents go back to their shapes before, or to what their operators reloaded
    // meanwhile (a SIGHUP during the calibration is kept).
    let released = links.release();
    let measured = measured?;
    released?;
    Ok(measured)
}

/// An error when a node did not renew the measurement's shape: what was measured may not
/// have been at it.
fn held(links: &LinkLease) -> Result<()> {
    match links.broken() {
        Some(why) => anyhow::bail!("the measurement's shape may not have held: {why}"),
        None => Ok(()),
    }
}

/// A quarter of the least per-link goodput with every link busy, rounded down to 1, 2 or
/// 5 times a power of ten (in bits per second): the ranks of a run share the cores with
/// the agents, and a link the agents must hold at its setting needs that headroom.
pub fn suggest(together: &[f64]) -> f64 {
    let least = together.iter().copied().fold(f64::INFINITY, f64::min);
    if !least.is_finite() || least <= 0.0 {
        return 0.0;
    }
    let bits = least * 8.0 / 4.0;
    let decade = 10f64.powf(bits.log10().floor());
    let step = [5.0, 2.0, 1.0]
        .into_iter()
        .find(|m| m * decade <= bits)
        .unwrap_or(1.0);
    step * decade / 8.0
}

/// Run the calibration; `progress` is told what is being measured.
pub fn calibrate(
    cluster: &Cluster,
    seconds: f64,
    lease: Lease,
    mut progress: impl FnMut(&str),
) -> Result<Vec<LinkCalibration>> {
    let nodes = &cluster.file.nodes;
    if nodes.len() < 2 {
        anyhow::bail!("calibration needs at least two nodes (same-node traffic is not shaped)");
    }
    // Agents started by hand, by deploy or by Slurm know no other node until told.
    crate::cluster::directory::ensure(cluster, nodes)?;
    let timeout = Duration::from_secs_f64(seconds * 2.0 + 20.0);
    // Put back when released or dropped: after each link, an error, or a panic.
    let links = LinkLease::hold(cluster, lease);
    let mut out = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let to = &nodes[(i + 1) % nodes.len()];
        let from_c = AgentClient::with_timeout(cluster, n, timeout);
        let capacity = from_c.status()?.capacity;
        let measure = |pct: Pct| -> Result<f64> {
            links.set(
                &[i, (i + 1) % nodes.len()],
                ShapeChange {
                    pct: Some(pct),
                    capacity: None,
                    latency_us: Some(0),
                    lease_s: None,
                },
            )?;
            let achieved = from_c.calibrate(&to.name, seconds)?.achieved_bytes_per_sec;
            held(&links)?;
            Ok(achieved)
        };
        progress(&format!(
            "{} -> {}: at 100% for {seconds} s",
            n.name, to.name
        ));
        let shaped = measure(Pct::FULL);
        progress(&format!(
            "{} -> {}: unlimited for {seconds} s",
            n.name, to.name
        ));
        let host = shaped.as_ref().ok().map(|_| measure(Pct::UNLIMITED));
        // Both nodes back to their shapes before, or to what their operators reloaded
        // meanwhile.
        links.release()?;
        let achieved = shaped?;
        let host_max = host.unwrap_or(Ok(0.0))?;
        let capacity = capacity.bytes_per_sec();
        let error = achieved / capacity - 1.0;
        let warning = warning(capacity, achieved, host_max);
        out.push(LinkCalibration {
            from: n.name.clone(),
            to: to.name.clone(),
            capacity_bytes_per_sec: capacity,
            achieved_bytes_per_sec: achieved,
            error,
            host_max_bytes_per_sec: host_max,
            warning,
        });
    }
    Ok(out)
}

/// The table of links, then every link at once and the capacity suggested against the
/// cluster's `capacity` (bytes per second).
pub fn render(c: &Calibrated, capacity: f64) -> String {
    let rate = format_bits_per_sec;
    let least = c
        .together_bytes_per_sec
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min);
    let advice = if c.suggested_capacity_bytes_per_sec <= 0.0 {
        "nothing went through with every link busy: is the machine overloaded?".to_string()
    } else if capacity > c.suggested_capacity_bytes_per_sec {
        format!(
            "above it, runs whose ranks share the cores may be flagged (links not held): `throttle-ctl local up --capacity {}`; the answers are in % of the link, so compare programs at one capacity, and choose one whose ratio of link to compute is that of the cluster you will buy (docs/local.md)",
            c.suggested_capacity
        )
    } else {
        "this cluster's capacity is within it".to_string()
    };
    format!(
        "{}every link at once (unlimited): {} each at the least; suggested capacity for runs on this machine: {} (a quarter of it), this cluster's is {}: {advice}\n",
        links_table(&c.links),
        rate(least),
        c.suggested_capacity,
        rate(capacity)
    )
}

fn links_table(results: &[LinkCalibration]) -> String {
    let mut t = Table::new(&[
        "link",
        "capacity",
        "achieved at 100%",
        "error",
        "host max (unlimited)",
    ]);
    let mut warnings = String::new();
    for r in results {
        t.row(vec![
            format!("{} -> {}", r.from, r.to),
            format_bits_per_sec(r.capacity_bytes_per_sec),
            format_bits_per_sec(r.achieved_bytes_per_sec),
            format!("{:+.2}%", r.error * 100.0),
            format_bits_per_sec(r.host_max_bytes_per_sec),
        ]);
        if let Some(w) = &r.warning {
            warnings.push_str(&format!("warning: {} -> {}: {w}\n", r.from, r.to));
        }
    }
    format!("{}{warnings}", t.render_in(crate::output::terminal_width()))
}

/// What a user should do about a link that is not what its setting says, or `None` when it
/// is within 2%.
fn warning(capacity: f64, achieved: f64, host_max: f64) -> Option<String> {
    let error = achieved / capacity - 1.0;
    let rate = format_bits_per_sec;
    if host_max < capacity * 1.02 {
        Some(format!(
            "this host carries at most {} between agents, not the {} asked for: lower the capacity to about {}",
            rate(host_max),
            rate(capacity),
            rate(host_max * 0.9)
        ))
    } else if error < -0.02 {
        Some(format!(
            "achieved rate is off by {:+.1}%: the agents carried {} where {} is set, though this host carries {}. \
             A busy machine does this (something else running, or ranks that busy-poll: `status` shows each agent's CPU): \
             run calibrate again when it is quiet. If it stays, lower the capacity to {} (`local up --capacity`, or \
             `capacity` in the cluster file), so that every percentage is of what the link really carries",
            error * 100.0,
            rate(achieved),
            rate(capacity),
            rate(host_max),
            rate(achieved)
        ))
    } else if error > 0.02 {
        Some(format!(
            "achieved rate is off by {:+.1}%: the agents let {} through where {} is set, more than the setting: \
             runs are not at their bandwidth; please report it with `status --json` of the nodes",
            error * 100.0,
            rate(achieved),
            rate(capacity)
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suggested_capacity_is_a_round_quarter_of_the_least_link() {
        // 3.1 Gbit/s the least: a quarter 775 Mbit/s, rounded down to 500.
        let s = suggest(&[3.1e9 / 8.0, 4e9 / 8.0]);
        assert_eq!(throttle_proto::rate::format_flag(s), "500Mbit");
        assert_eq!(
            throttle_proto::rate::format_flag(suggest(&[0.9e9 / 8.0])),
            "200Mbit"
        );
        assert_eq!(
            throttle_proto::rate::format_flag(suggest(&[40e9 / 8.0])),
            "10Gbit"
        );
        assert_eq!(suggest(&[]), 0.0);
        assert_eq!(suggest(&[0.0, 1e9]), 0.0);
    }

    #[test]
    fn a_link_off_its_setting_comes_with_what_to_do() {
        let (cap, host) = (125e6, 4e9);
        assert_eq!(warning(cap, cap * 0.99, host), None);
        let slow = warning(cap, cap * 0.922, host).unwrap();
        assert!(slow.starts_with("achieved rate is off by -7.8%"), "{slow}");
        assert!(
            slow.contains("run calibrate again when it is quiet"),
            "{slow}"
        );
        assert!(slow.contains("lower the capacity to 922 Mbit/s"), "{slow}");
        let fast = warning(cap, cap * 1.05, host).unwrap();
        assert!(fast.contains("more than the setting"), "{fast}");
        let small_host = warning(cap, cap * 0.5, cap * 0.6).unwrap();
        assert!(
            small_host.starts_with("this host carries at most"),
            "{small_host}"
        );
    }
}
