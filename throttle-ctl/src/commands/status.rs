//! `throttle-ctl status`: every node's shape, rates and streams, as a table or JSON. A node
//! that does not answer stays in the table, with its error in its own column.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args as ClapArgs;
use serde_json::{json, Value};
use throttle_analysis::table::Table;
use throttle_proto::rate::format_bits_per_sec;
use throttle_proto::status::Status;

use super::{Context, Exit};
use crate::cluster::agent_client::AgentClient;
use crate::cluster::Cluster;
use crate::output;

#[derive(ClapArgs, Debug)]
#[command(after_help = "Exits with 1 when a node does not answer.")]
pub struct Args {
    /// Print JSON (one array, one object per node; a node that did not answer has an
    /// `error`) instead of a table.
    #[arg(long)]
    json: bool,
}

impl Args {
    pub fn exec(self, ctx: &Context) -> Exit {
        let cluster = ctx.cluster()?;
        let results = collect(&cluster);
        if self.json {
            output::print_json(&to_json(&results))?;
        } else {
            output::print(render(&results))?;
        }
        Ok(if results.iter().all(|(_, r)| r.is_ok()) {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

/// Each node's status, or the error that kept us from getting it (queried in parallel).
pub fn collect(cluster: &Cluster) -> Vec<(String, Result<Status>)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = cluster
            .file
            .nodes
            .iter()
            .map(|n| {
                let c = AgentClient::new(cluster, n);
                (n.name.to_string(), s.spawn(move || c.status()))
            })
            .collect();
        handles
            .into_iter()
            .map(|(name, h)| {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("status query panicked")));
                (name, r)
            })
            .collect()
    })
}

/// The table; a node that did not answer shows `down` and its error (whole, unless far
/// longer than any of ours).
pub fn render(results: &[(String, Result<Status>)]) -> String {
    let mut t = Table::new(&[
        "node",
        "pct",
        "capacity",
        "limit",
        "latency",
        "egress",
        "ingress",
        "streams",
        "links",
        "intercepted out/in",
        "egress bytes",
        "error",
    ]);
    for (name, r) in results {
        match r {
            Ok(s) => t.row(vec![
                name.clone(),
                s.pct.to_string(),
                s.capacity.to_string(),
                s.limit_bytes_per_sec
                    .map(format_bits_per_sec)
                    .unwrap_or_else(|| "-".into()),
                format!("{} us", s.latency_us),
                format_bits_per_sec(s.egress.rate_bytes_per_sec),
                format_bits_per_sec(s.ingress.rate_bytes_per_sec),
                s.open_streams.to_string(),
                match &s.kernel_pacing {
                    Some(k) if k.unpaced > 0 => {
                        format!("kernel: {} paced, {} UNPACED", k.paced_now, k.unpaced)
                    }
                    Some(k) => format!("kernel: {} paced", k.paced_now),
                    None => "proxy".into(),
                },
                s.intercepted
                    .as_ref()
                    .map(|i| {
                        let how = match (i.kernel, i.preload_port.is_some()) {
                            (true, true) => " kernel+preload",
                            (true, false) => " kernel",
                            (false, true) => " preload",
                            (false, false) => "",
                        };
                        format!("{}/{}{how}", i.outgoing, i.incoming)
                    })
                    .unwrap_or_else(|| "-".into()),
                s.egress.bytes.to_string(),
                s.intercepted
                    .as_ref()
                    .map(not_intercepted)
                    .unwrap_or_default(),
            ]),
            Err(e) => {
                let mut row = vec![name.clone(), "down".into()];
                row.extend(std::iter::repeat_n(String::new(), 9));
                // The row names the node already.
                let text = format!("{e:#}");
                let text = text
                    .strip_prefix(&format!("node `{name}`: "))
                    .unwrap_or(&text);
                // The last column: whole with its hint, up to a length no message of ours
                // reaches (whatever answers at a dead agent's address writes part of it),
                // and with control characters written out.
                row.push(cut(&throttle_analysis::table::printable(text), 600));
                t.row(row);
            }
        }
    }
    t.render_in(crate::output::terminal_width())
}

/// `text` cut to `max` characters, with an ellipsis when cut (`--json` has the whole).
/// The status column's note on the nodes this node does not intercept connections to.
fn not_intercepted(i: &throttle_proto::status::InterceptedStatus) -> String {
    let list = |names: &[throttle_proto::name::Name]| {
        names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut notes = Vec::new();
    if !i.outside.is_empty() {
        notes.push(format!(
            "never intercepting to {} (outside --intercept-within)",
            list(&i.outside)
        ));
    }
    if !i.not_proven.is_empty() {
        notes.push(format!(
            "not intercepting to {} (no agent proved the token there yet)",
            list(&i.not_proven)
        ));
    }
    cut(&notes.join("; "), 90)
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(max - 1).collect();
        s.push('…');
        s
    }
}

pub fn to_json(results: &[(String, Result<Status>)]) -> Value {
    Value::Array(
        results
            .iter()
            .map(|(name, r)| match r {
                Ok(s) => serde_json::to_value(s).unwrap_or(Value::Null),
                Err(e) => json!({ "node": name, "error": format!("{e:#}") }),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_that_is_down_says_why_in_full() {
        let e = anyhow::anyhow!(
            "node `n1`: no agent answers at http://198.18.160.122:34719: Connection refused (os error 111) (is it running? `throttle-ctl local up` starts a local cluster)"
        );
        let table = render(&[("n1".to_string(), Err(e))]);
        assert!(
            table.contains(
                "no agent answers at http://198.18.160.122:34719: Connection refused (os error 111) (is it running? `throttle-ctl local up` starts a local cluster)"
            ),
            "{table}"
        );
        assert!(
            !table.contains("node `n1`"),
            "the row names the node: {table}"
        );
        // What a stranger at a dead agent's address wrote cannot drive the terminal.
        let e = anyhow::anyhow!("node `n1`: \u{1b}]0;owned\u{7}{}", "x".repeat(5000));
        let table = render(&[("n1".to_string(), Err(e))]);
        assert!(
            !table.contains('\u{1b}') && table.contains("\\u{1b}]0;owned"),
            "{table}"
        );
        assert!(table.len() < 1000, "{}", table.len());
    }
}
