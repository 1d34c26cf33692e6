//! The forward rules an agent holds: each rule's description, its connection count and
//! its listener's task. Plain data: the agent's state holds it, and [`crate::services::forward`]
//! (which starts and carries the rules) fills it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;

use throttle_proto::forward::ForwardInfo;

/// Forward rules an agent holds at once.
pub const MAX_FORWARDS: usize = 256;

/// One rule: what it forwards, how many connections it accepted, and its listener's task.
struct Rule {
    info: ForwardInfo,
    connections: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

/// The forward rules of this agent.
#[derive(Default)]
pub struct Forwards {
    rules: Mutex<BTreeMap<u64, Rule>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Forwards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.list()).finish()
    }
}

impl Forwards {
    /// The id the next rule gets.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Hold a started rule: its listener's `task` runs until the rule is removed.
    pub fn insert(&self, info: ForwardInfo, connections: Arc<AtomicU64>, task: JoinHandle<()>) {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        rules.insert(
            info.id,
            Rule {
                info,
                connections,
                task,
            },
        );
    }

    pub fn list(&self) -> Vec<ForwardInfo> {
        let rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        rules
            .values()
            .map(|r| {
                let mut i = r.info.clone();
                i.connections = r.connections.load(Ordering::Relaxed);
                i
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stop listening for rule `id` (open connections carry on). False if unknown.
    pub fn remove(&self, id: u64) -> bool {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        match rules.remove(&id) {
            Some(r) => {
                r.task.abort();
                true
            }
            None => false,
        }
    }

    /// Stop every rule.
    pub fn clear(&self) {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        for (_, r) in std::mem::take(&mut *rules) {
            r.task.abort();
        }
    }
}
