//! `model loggps`: LogGPS parameters measured through the agents at each bandwidth and
//! process count (`throttle-loggps` jobs), stored in the results database, fitted.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use anyhow::{anyhow, Result};
use clap::Args as ClapArgs;
use serde::Deserialize;
use throttle_analysis::models::loggps::{self, LinkFit, LinkMeasurement, G_TOLERANCE};
use throttle_analysis::table::Table;
use throttle_proto::rate::format_bits_per_sec;
use throttle_proto::workload::{LogGpsOptions, Options};
use throttle_proto::Pct;

use crate::cluster::Cluster;
use crate::commands::{interrupt_flag, parse_list, Context};
use crate::job::{self, JobSpec, Outcome};
use crate::link_lease::LinkLease;
use crate::output;
use crate::run_status::RunStatus;
use crate::store::{Store, DEFAULT_DB};
use crate::workload::Workload;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Bandwidth settings to measure at, percent of the capacity.
    #[arg(long, default_value = "100,50,20,10")]
    bandwidths: String,
    /// Process counts P (one rank per node; rank 0 is the master with P - 1 peers).
    #[arg(long, default_value = "2,4")]
    procs: String,
    /// Message sizes in bytes for the round trip and the overheads.
    #[arg(long, default_value = "1,1024,16384,65536")]
    sizes: String,
    /// Repeats per message size.
    #[arg(long, default_value_t = 30)]
    repeats: u32,
    /// Seconds the stream for G should last.
    #[arg(long, default_value_t = 1.0)]
    stream_seconds: f64,
    /// Results database the measurements are stored in [default: ./throttle-results.db].
    #[arg(long)]
    db: Option<PathBuf>,
    /// Seconds the agents keep a measurement's job and bandwidth without hearing from this
    /// command (it renews them); if throttle-ctl is killed, the job dies and each link goes
    /// back to what it was this long after.
    #[arg(long, default_value_t = throttle_proto::Lease::DEFAULT)]
    lease: throttle_proto::Lease,
    /// More attempts for a measurement whose links did not hold their setting (a flagged
    /// run: an agent starved of CPU or the machine paused); one flagged every time stops
    /// the campaign with why, keeping what was stored.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=100))]
    retries: u32,
    /// Measure nothing: fit and print what the database holds.
    #[arg(long)]
    stored: bool,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    json: bool,
}

/// What `throttle-loggps` reports (its `detail`).
#[derive(Deserialize)]
struct Reported {
    procs: usize,
    latency: f64,
    gap: f64,
    gap_per_byte: f64,
    send_per_byte: f64,
    recv_per_byte: f64,
    master_send_overhead: f64,
    master_recv_overhead: f64,
    sizes: Vec<ReportedSize>,
}

#[derive(Deserialize)]
struct ReportedSize {
    send_overhead: f64,
    recv_overhead: f64,
}

impl Args {
    pub fn exec(self, ctx: &Context) -> crate::commands::Exit {
        let db = self.db.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_DB));
        let rows = if self.stored {
            if !db.exists() {
                anyhow::bail!("no results database at {}", db.display());
            }
            Store::read(&db)?.links()?
        } else {
            self.measure(ctx, &db)?
        };
        if rows.is_empty() {
            anyhow::bail!(
                "{} holds no LogGPS measurement: run `throttle-ctl model loggps` without --stored",
                db.display()
            );
        }
        let fit = loggps::fit(&rows);
        if self.json {
            output::print_json(&serde_json::json!({ "measurements": rows, "fit": fit }))?;
        } else {
            output::print(render(&rows, &fit))?;
        }
        Ok(if fit.all_passed {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }

    /// Seconds a measurement may take: three times what it should (ping-pongs of every
    /// size, the probe and the stream for G at the setting's rate) and a minute.
    fn time_limit(&self, bw: Pct, capacity: f64, sizes: &[usize]) -> f64 {
        let rate = capacity * throttle_analysis::data::cells::percent(bw) / 100.0;
        let exchanges = 2.0 * (self.repeats as f64 + 5.0);
        let pings: f64 = sizes
            .iter()
            .map(|&k| exchanges * (2.0 * k as f64 / rate + 1e-3))
            .sum();
        let stream = self.stream_seconds.max(8e6 / rate) + 4.2e6 / rate;
        (3.0 * (pings + stream) + 60.0).min(7.0 * 86400.0)
    }

    /// Measure at every process count and bandwidth, storing each row as it comes; the
    /// previous bandwidth is put back at the end.
    fn measure(&self, ctx: &Context, db: &std::path::Path) -> Result<Vec<LinkMeasurement>> {
        let (bandwidths, procs, sizes) = self.parse_lists()?;
        // The program's own checks, before anything is shaped.
        let workload = Workload::new(Options::LogGps(LogGpsOptions {
            sizes: sizes.clone(),
            repeats: self.repeats,
            stream_seconds: self.stream_seconds,
            ..LogGpsOptions::default()
        }))?;
        let cluster = ctx.cluster()?;
        let have = cluster.file.nodes.len();
        if let Some(&p) = procs.iter().find(|&&p| p < 2 || p > have) {
            anyhow::bail!(
                "--procs {p}: each count must be from 2 to the cluster's {have} nodes (one rank per node; same-node traffic is not shaped)"
            );
        }
        let store = Store::open(db)?;
        // Put back when dropped: after the campaign, an error, or a panic.
        let links = LinkLease::hold(&cluster, self.lease);
        let campaign = Campaign {
            cluster: &cluster,
            links: &links,
            workload,
            sizes,
            cancel: interrupt_flag()?,
            host: std::fs::read_to_string("/etc/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
        };
        let mut rows = Vec::new();
        let total = procs.len() * bandwidths.len();
        let result = (|| -> Result<()> {
            for (i, (&p, &bw)) in procs
                .iter()
                .flat_map(|p| bandwidths.iter().map(move |b| (p, b)))
                .enumerate()
            {
                crate::note!("[{}/{total}] P={p} at {}", i + 1, bw.to_string());
                let row = self.measure_at(&campaign, p, bw, rows.len())?;
                store.insert_link(&row)?;
                rows.push(row);
            }
            Ok(())
        })();
        drop(links);
        result?;
        Ok(rows)
    }

    /// --bandwidths, --procs and --sizes, each with at least one value.
    fn parse_lists(&self) -> Result<(Vec<Pct>, Vec<usize>, Vec<usize>)> {
        let bandwidths = parse_list::<Pct>(&self.bandwidths, "--bandwidths")?;
        let procs = parse_list::<usize>(&self.procs, "--procs")?;
        let sizes = parse_list::<usize>(&self.sizes, "--sizes")?;
        if bandwidths.is_empty() || procs.is_empty() || sizes.is_empty() {
            anyhow::bail!("--bandwidths, --procs and --sizes need at least one value each");
        }
        Ok((bandwidths, procs, sizes))
    }

    /// One measurement: `throttle-loggps` on `p` nodes at `bw`, as a row for the store
    /// (`stored`: the measurements stored so far, for the message when interrupted).
    fn measure_at(
        &self,
        c: &Campaign,
        p: usize,
        bw: Pct,
        stored: usize,
    ) -> Result<LinkMeasurement> {
        let spec = JobSpec {
            workload: c.workload.clone(),
            nodes: p,
            ranks_per_node: 1,
            bw,
            latency_us: None,
            time_limit: throttle_proto::TimeLimit::from_secs(self.time_limit(
                bw,
                c.cluster.file.capacity.bytes_per_sec(),
                &c.sizes,
            ))?,
            job_prefix: None,
        };
        // A flagged measurement timed the emulator as much as the link: measured again.
        let mut flagged = 0;
        let outcome = loop {
            let outcome = job::execute(c.cluster, c.links, &spec, c.cancel)?;
            if outcome.status == RunStatus::Interrupted {
                anyhow::bail!("interrupted; {stored} measurements stored");
            }
            if outcome.status != RunStatus::Ok {
                anyhow::bail!(
                    "the measurement at P={p}, {} failed: {}",
                    bw,
                    outcome.reason.as_deref().unwrap_or("no reason given")
                );
            }
            match outcome.flag() {
                None => break outcome,
                Some(flag) if flagged < self.retries => {
                    crate::note!("P={p} at {bw}: flagged, measured again ({flag})");
                    flagged += 1;
                }
                Some(flag) => anyhow::bail!(
                    "the measurement at P={p}, {bw} was flagged on all {} attempts (its links did not run at their setting; the last: {flag}); {stored} measurements stored. On a busy machine, run it again; where an agent was starved of CPU, give the agents cores of their own (`throttle-ctl local up --pin`) or use fewer processes",
                    flagged + 1
                ),
            }
        };
        link_row(&outcome, bw, &c.host)
    }
}

/// What every measurement of one `model loggps` shares.
struct Campaign<'a> {
    cluster: &'a Cluster,
    links: &'a LinkLease,
    workload: Workload,
    sizes: Vec<usize>,
    cancel: &'static AtomicBool,
    /// This machine's name, stored with each row.
    host: String,
}

/// The row a successful measurement at `bw` stores: `throttle-loggps`'s report, the
/// smallest size's overheads as o_s and o_r.
fn link_row(outcome: &Outcome, bw: Pct, host: &str) -> Result<LinkMeasurement> {
    let result = outcome
        .result
        .as_ref()
        .ok_or_else(|| anyhow!("throttle-loggps reported no result"))?;
    let r: Reported = serde_json::from_value(result.detail.clone()).map_err(|e| {
        anyhow!("throttle-loggps's report is not what this throttle-ctl expects: {e}")
    })?;
    let first = r
        .sizes
        .first()
        .ok_or_else(|| anyhow!("throttle-loggps reported no message size"))?;
    Ok(LinkMeasurement {
        measured_at: crate::sweep::now_utc(),
        host: host.to_string(),
        version: env!("CARGO_PKG_VERSION").into(),
        job: outcome.job.clone(),
        procs: r.procs as u32,
        bw_pct: bw,
        capacity: outcome.capacity_bytes_per_sec,
        latency: r.latency,
        send_overhead: first.send_overhead,
        recv_overhead: first.recv_overhead,
        gap: r.gap,
        gap_per_byte: r.gap_per_byte,
        send_per_byte: r.send_per_byte,
        recv_per_byte: r.recv_per_byte,
        master_send_overhead: r.master_send_overhead,
        master_recv_overhead: r.master_recv_overhead,
        detail: result.detail.to_string(),
    })
}

fn us(v: f64) -> String {
    format!("{:.1} us", v * 1e6)
}

fn render(rows: &[LinkMeasurement], fit: &LinkFit) -> String {
    let mut t = Table::new(&[
        "P",
        "bw",
        "L",
        "o_s",
        "o_r",
        "g",
        "G (rate)",
        "master o_s",
        "master o_r",
    ]);
    for r in rows {
        t.row(vec![
            r.procs.to_string(),
            r.bw_pct.to_string(),
            us(r.latency),
            us(r.send_overhead),
            us(r.recv_overhead),
            us(r.gap),
            format!(
                "{:.3} ns/B ({})",
                r.gap_per_byte * 1e9,
                format_bits_per_sec(1.0 / r.gap_per_byte)
            ),
            us(r.master_send_overhead),
            us(r.master_recv_overhead),
        ]);
    }
    let mut out = String::from("LogGPS through the agents (Mizutani et al.), one rank per node\n");
    out.push_str(&t.render_in(crate::output::terminal_width()));
    let mut g = Table::new(&["bw", "G measured", "1/(pct x capacity)", "error", "check"]);
    for s in &fit.settings {
        g.row(vec![
            s.bw_pct.to_string(),
            format!("{:.4} ns/B", s.gap_per_byte * 1e9),
            s.expected_gap_per_byte
                .map(|e| format!("{:.4} ns/B", e * 1e9))
                .unwrap_or_else(|| "-".into()),
            s.error
                .map(|e| format!("{:+.2}%", e * 100.0))
                .unwrap_or_else(|| "-".into()),
            match s.passed {
                Some(true) => "passed".into(),
                Some(false) => "FAILED".into(),
                None => "-".into(),
            },
        ]);
    }
    out.push_str(&format!(
        "\nG against the setting (the emulator's acceptance test: within {:.0}%)\n",
        G_TOLERANCE * 100.0
    ));
    out.push_str(&g.render_in(crate::output::terminal_width()));
    for f in [&fit.send, &fit.recv].into_iter().flatten() {
        out.push_str(&format!(
            "master {} overhead: o = {:.2} us {:+.3} us x P {:+.4} ns x k   (R^2 {:.2}, {} measurements)\n",
            f.side,
            f.a * 1e6,
            f.b * 1e6,
            f.per_byte * 1e9,
            f.r2,
            f.points.len()
        ));
    }
    if fit.send.is_none() {
        out.push_str("o = o'_a + o'_b P + O k needs measurements at two or more process counts (--procs 2,4,8)\n");
    }
    out
}
