//! The one way the controller changes a link's shape, and the one way it puts it back.
//!
//! A command that sets a bandwidth (`run`, `sweep`, the demo, `calibrate`, `model loggps`)
//! holds a [`LinkLease`] on the cluster's links while it runs. Every change goes through
//! it and is leased (`PUT /shape` with `lease_s`); one thread renews the nodes of the last
//! change every quarter of the lease, and the running job's lease with them (a job is
//! launched with the same lease: one lease per run, one loop renewing it); and the
//! lease's end releases every node it changed
//! (`POST /shape/release`): each agent goes back to the shape the first leased change
//! replaced, or to the one its operator reloaded (SIGHUP) meanwhile, which is never undone.
//! The end comes when the lease is dropped (the command finished, failed or panicked), or
//! from [`release_before_quit`] on a second Ctrl-C, which exits without running drops.
//! Killed outright (SIGKILL, a lost host), the controller renews nothing, and each agent
//! goes back by itself when the lease runs out.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use throttle_proto::status::Status;
use throttle_proto::{Lease, Name, ShapeChange};

use crate::cluster::agent_client::AgentClient;
use crate::cluster::Cluster;

/// The cluster's links, held by one command: see the module's doc.
pub struct LinkLease {
    shared: Arc<Shared>,
    renewer: Option<JoinHandle<()>>,
}

/// What the command's thread, the renewing thread and a second Ctrl-C share.
struct Shared {
    /// One client per node of the cluster file, in its order.
    clients: Vec<AgentClient>,
    lease: Lease,
    stop: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The nodes the last change set: renewed.
    renewing: Vec<usize>,
    /// Every node changed and not released since: released at the end.
    changed: BTreeSet<usize>,
    /// The job running on the nodes given, whose lease is renewed with the shape.
    job: Option<(Name, Vec<usize>)>,
    /// Why the last change (or the running job) may not have held: a node that did not
    /// renew it.
    broken: Option<String>,
    /// Counts the changes and releases: a renewal's failure counts only for the change
    /// it was made for (one answered after the next change must not fail that one).
    generation: u64,
}

/// The leases a second Ctrl-C releases before the process exits.
static HELD: Mutex<Vec<Arc<Shared>>> = Mutex::new(Vec::new());

fn held() -> MutexGuard<'static, Vec<Arc<Shared>>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Release every node changed since the last release; the first failure is returned,
    /// the other nodes still released.
    fn release(&self) -> Result<()> {
        let changed = {
            let mut s = self.state();
            s.renewing.clear();
            s.generation += 1;
            std::mem::take(&mut s.changed)
        };
        let mut first = None;
        for i in changed {
            if let Err(e) = self.clients[i].release_shape() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Renew the nodes of the last change, and the running job on its nodes; a node that
    /// does not is remembered (once per change) and said.
    fn renew(&self) {
        let job = self.state().job.clone();
        if let Some((name, nodes)) = job {
            for i in nodes {
                let c = &self.clients[i];
                if let Err(e) = c.renew(&name) {
                    let mut s = self.state();
                    if s.broken.is_none() && s.job.as_ref().is_some_and(|(j, _)| *j == name) {
                        s.broken = Some(format!(
                            "node `{}` no longer holds the job (its lease of {:.0} s ran out, or the agent restarted): {e:#}",
                            c.node(),
                            self.lease.secs()
                        ));
                    }
                }
            }
        }
        let (renewing, generation) = {
            let s = self.state();
            (s.renewing.clone(), s.generation)
        };
        for i in renewing {
            let c = &self.clients[i];
            if let Err(e) = c.renew_shape() {
                let first = {
                    let mut s = self.state();
                    let first = s.broken.is_none() && s.generation == generation;
                    if first {
                        s.broken = Some(format!(
                            "node `{}` did not renew the run's bandwidth, which may have gone back to the shape before the run while it ran: {e:#}",
                            c.node()
                        ));
                    }
                    first
                };
                // Said outside the lock: a blocked standard error must not stall the run.
                if first {
                    crate::note!(
                        "warning: node `{}` did not renew its bandwidth (it may be back to its shape before): {e:#}",
                        c.node()
                    );
                }
            }
        }
    }
}

impl LinkLease {
    /// Hold the cluster's links for one command, each change leased for `lease` and
    /// renewed while this lives. Nothing changes until [`LinkLease::set`].
    pub fn hold(cluster: &Cluster, lease: Lease) -> LinkLease {
        let clients = cluster
            .file
            .nodes
            .iter()
            .map(|n| AgentClient::new(cluster, n))
            .collect();
        let shared = Arc::new(Shared {
            clients,
            lease,
            stop: AtomicBool::new(false),
            state: Mutex::new(State::default()),
        });
        held().push(shared.clone());
        let renewing = shared.clone();
        let renewer = std::thread::spawn(move || {
            let every = renewing.lease.renew_every();
            let mut renewed = Instant::now();
            while !renewing.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
                if renewed.elapsed() >= every {
                    renewed = Instant::now();
                    renewing.renew();
                }
            }
        });
        LinkLease {
            shared,
            renewer: Some(renewer),
        }
    }

    /// Change the shape of the nodes `nodes` (indices into the cluster file) to `change`,
    /// leased; from now on these nodes, and only these, are renewed. The shape the last
    /// node reported.
    pub fn set(&self, nodes: &[usize], change: ShapeChange) -> Result<Status> {
        let change = ShapeChange {
            lease_s: Some(self.shared.lease),
            ..change
        };
        let mut last = None;
        for &i in nodes {
            let c = self
                .shared
                .clients
                .get(i)
                .ok_or_else(|| anyhow!("no node {i} in the cluster file"))?;
            // Changed, even when the answer is lost: it is released at the end.
            self.shared.state().changed.insert(i);
            last = Some(c.set_shape(&change)?);
        }
        // Renewed once every node holds its lease: a renewal of a node not set yet would
        // fail.
        let mut s = self.shared.state();
        s.renewing = nodes.to_vec();
        s.broken = None;
        s.generation += 1;
        drop(s);
        last.ok_or_else(|| anyhow!("no nodes to shape"))
    }

    /// Why the last change, or the running job, may not have held while it was meant to
    /// (a node did not renew it), if so.
    pub fn broken(&self) -> Option<String> {
        self.shared.state().broken.clone()
    }

    /// How long a change, or a job, holds without a renewal: a job is launched with it.
    pub fn lease(&self) -> Lease {
        self.shared.lease
    }

    /// Renew `job`'s lease on `nodes` (indices into the cluster file) with the shape's,
    /// until [`LinkLease::end_job`].
    pub fn hold_job(&self, job: &Name, nodes: &[usize]) {
        self.shared.state().job = Some((job.clone(), nodes.to_vec()));
    }

    /// The job is over (or given up): its lease is renewed no more.
    pub fn end_job(&self) {
        self.shared.state().job = None;
    }

    /// Put every changed node back now (the agents go back to their shapes before, or to
    /// what their operators reloaded meanwhile); the lease holds on, for changes to come.
    pub fn release(&self) -> Result<()> {
        self.shared.release()
    }
}

impl Drop for LinkLease {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.renewer.take() {
            let _ = t.join();
        }
        held().retain(|s| !Arc::ptr_eq(s, &self.shared));
        if let Err(e) = self.shared.release() {
            crate::note!("warning: could not put the previous bandwidth back: {e:#}");
        }
    }
}

/// For a process about to exit without unwinding (a second Ctrl-C): release the links of
/// every live [`LinkLease`], and say so.
pub fn release_before_quit() {
    let leases: Vec<Arc<Shared>> = held().clone();
    if leases.iter().any(|s| !s.state().changed.is_empty()) {
        crate::note!("quitting: putting the previous bandwidth back first");
    }
    for s in leases {
        s.stop.store(true, Ordering::SeqCst);
        if let Err(e) = s.release() {
            crate::note!("warning: could not put the previous bandwidth back: {e:#}");
        }
    }
}
