//! `throttle-ctl set PCT`: throttle every node, or one, to a percentage of its link.

use std::process::ExitCode;

use clap::Args as ClapArgs;
use throttle_proto::rate::format_bits_per_sec;
use throttle_proto::shape::{ShapeChange, MAX_LATENCY_US};
use throttle_proto::{Pct, Rate};

use super::{Context, Exit};
use crate::cluster::agent_client::AgentClient;
use crate::output;

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "Examples:\n  throttle-ctl set 30                  every node at 30% of its capacity\n  throttle-ctl set unlimited           shaping off\n  throttle-ctl set 100 --node n2 --latency-us 50\n\nValues are checked before any agent is contacted; nodes are set in order and the\nfirst that refuses stops the command (the ones before it keep the new setting)."
)]
pub struct Args {
    /// Percentage from 0.01 to 100, or `unlimited`.
    pct: Pct,
    /// Only this node (its name, or its address as a hostfile lists it).
    #[arg(long)]
    node: Option<String>,
    /// Added one-way latency at egress, microseconds.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=MAX_LATENCY_US))]
    latency_us: Option<u64>,
    /// Also change the link capacity (e.g. 10Gbit).
    #[arg(long)]
    capacity: Option<Rate>,
    /// Print the resulting status of each node as JSON.
    #[arg(long)]
    json: bool,
}

/// An added latency from which `set` says what it means (100 ms).
const LARGE_LATENCY_US: u64 = 100_000;

impl Args {
    pub fn exec(self, ctx: &Context) -> Exit {
        let change = ShapeChange {
            pct: Some(self.pct),
            capacity: self.capacity,
            latency_us: self.latency_us,
            lease_s: None,
        };
        if let Some(us) = self.latency_us.filter(|us| *us >= LARGE_LATENCY_US) {
            crate::note!(
                "warning: --latency-us {us} adds {:.0} ms to every message each way (and to every new connection between nodes); interconnects add 1-10 us, a WAN tens of ms",
                us as f64 / 1000.0
            );
        }
        let cluster = ctx.cluster()?;
        let applied = cluster
            .select(self.node.as_deref())?
            .into_iter()
            .map(|n| AgentClient::new(&cluster, n).set_shape(&change))
            .collect::<anyhow::Result<Vec<_>>>()?;
        if self.json {
            output::print_json(&applied)?;
        } else {
            let mut text = String::new();
            for s in applied {
                text.push_str(&format!(
                    "{}: {} of {} ({}), latency {} us\n",
                    s.node,
                    s.pct,
                    s.capacity,
                    s.limit_bytes_per_sec
                        .map(format_bits_per_sec)
                        .unwrap_or_else(|| "no limit".into()),
                    s.latency_us
                ));
            }
            output::print(text)?;
        }
        Ok(ExitCode::SUCCESS)
    }
}
