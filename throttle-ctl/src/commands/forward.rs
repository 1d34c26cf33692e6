//! `throttle-ctl forward add|list|rm`: shaped port forwards for unmodified TCP programs.

use std::process::ExitCode;

use anyhow::anyhow;
use clap::{Args as ClapArgs, Subcommand};
use serde_json::json;
use throttle_analysis::table::Table;
use throttle_proto::forward::{parse_destination, parse_listen, ForwardSpec};

use super::{Context, Exit};
use crate::cluster::agent_client::AgentClient;
use crate::output;

#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: ForwardCommand,
}

#[derive(Subcommand, Debug)]
enum ForwardCommand {
    /// Listen on ADDR on node FROM and carry each connection to HOST:PORT as seen from node TO.
    #[command(
        after_help = "Example (iperf3 from n0 to a server on n1, shaped by both links):\n  throttle-ctl forward add --from n0 --listen 127.0.1.1:5201 --to n1:127.0.1.2:5201\n  iperf3 -c 127.0.1.1 -p 5201\n\nHOST:PORT must be an address of node TO (its address in the cluster or one of its interfaces'),\nport 1024 or above: a forward carries traffic between the cluster's nodes, never to another\nhost, nor to a service bound to loopback only or a system port (unless TO's agent runs with\n--open-forwards); LISTEN takes a port from 1024 up on the same terms."
    )]
    Add {
        /// The node that listens (its name, e.g. n0).
        #[arg(long)]
        from: String,
        /// IP:PORT to listen on, on node FROM (port 0 picks one).
        #[arg(long)]
        listen: String,
        /// NODE:HOST:PORT: where each connection goes, as seen from NODE.
        #[arg(long)]
        to: String,
        /// Print the new forward (its id, listen address, destination) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the forwards of every node.
    List {
        /// Print them as JSON (each with its node).
        #[arg(long)]
        json: bool,
    },
    /// Remove a forward: `forward rm --node NODE ID` (ID and NODE as `forward list` shows
    /// them; open connections carry on).
    #[command(
        after_help = "Example:\n  throttle-ctl forward list\n  throttle-ctl forward rm --node n0 1"
    )]
    Rm {
        /// The node the forward listens on.
        #[arg(long)]
        node: String,
        /// The forward's id on that node.
        id: u64,
    },
}

impl Args {
    pub fn exec(self, ctx: &Context) -> Exit {
        let cluster = ctx.cluster()?;
        match self.command {
            ForwardCommand::Add {
                from,
                listen,
                to,
                json,
            } => {
                let node = cluster.node(&from)?;
                let (to_node, target) = parse_destination(&to).map_err(|e| anyhow!("--to: {e}"))?;
                cluster.node(&to_node)?;
                let spec = ForwardSpec {
                    listen: parse_listen(&listen).map_err(|e| anyhow!("--listen: {e}"))?,
                    to_node,
                    target,
                };
                let info = AgentClient::new(&cluster, node).add_forward(&spec)?;
                if json {
                    output::print_json(&info)?;
                } else {
                    output::print(format!(
                        "forward {} on {from}: {} -> {}:{}\n",
                        info.id, info.listen, info.to_node, info.target
                    ))?;
                }
            }
            ForwardCommand::List { json } => {
                let mut t = Table::new(&["node", "id", "listen", "to", "connections"]);
                let mut all = Vec::new();
                for n in &cluster.file.nodes {
                    for f in AgentClient::new(&cluster, n).list_forwards()? {
                        t.row(vec![
                            n.name.to_string(),
                            f.id.to_string(),
                            f.listen.to_string(),
                            format!("{}:{}", f.to_node, f.target),
                            f.connections.to_string(),
                        ]);
                        let mut v = serde_json::to_value(&f)?;
                        v["node"] = json!(n.name);
                        all.push(v);
                    }
                }
                if json {
                    output::print_json(&all)?;
                } else {
                    output::print(t.render_in(crate::output::terminal_width()))?;
                }
            }
            ForwardCommand::Rm { node, id } => {
                AgentClient::new(&cluster, cluster.node(&node)?)
                    .remove_forward(id)
                    .map_err(|e| {
                        anyhow!(
                            "{e:#}; `throttle-ctl forward list` shows the forwards and their ids"
                        )
                    })?;
                output::print(format!("removed forward {id} on {node}\n"))?;
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}
