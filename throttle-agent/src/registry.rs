//! Where the ranks on this node accept streams.
//!
//! A rank registers (job, rank, accept address) over a connection to the local endpoint
//! and stays registered while that connection is open: a rank that exits cannot leave a
//! stale entry behind. Streams for a rank that has not registered yet wait for it (ranks
//! of a job start at slightly different times) up to a deadline, then fail with a code.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::endpoint::Endpoint;
use crate::transport::wire::{Code, WireError};

/// Most ranks registered on one node at once.
pub const MAX_REGISTERED: usize = 65_536;

#[derive(Debug, Default)]
pub struct Registry {
    ranks: Mutex<HashMap<(String, u32), (u64, Endpoint)>>,
    next_id: Mutex<u64>,
    changed: Notify,
}

/// Removes its registration when dropped.
#[derive(Debug)]
pub struct Registration {
    registry: Arc<Registry>,
    key: (String, u32),
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut ranks = self
            .registry
            .ranks
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if ranks.get(&self.key).map(|(id, _)| *id) == Some(self.id) {
            ranks.remove(&self.key);
        }
    }
}

impl Registry {
    /// Register `rank` of `job`; refused if that rank is already registered here.
    pub fn register(
        self: &Arc<Self>,
        job: &str,
        rank: u32,
        accept: Endpoint,
    ) -> Result<Registration, WireError> {
        let key = (job.to_string(), rank);
        let id = {
            let mut n = self.next_id.lock().unwrap_or_else(|e| e.into_inner());
            *n += 1;
            *n
        };
        {
            let mut ranks = self.ranks.lock().unwrap_or_else(|e| e.into_inner());
            if ranks.len() >= MAX_REGISTERED {
                return Err(WireError::new(
                    Code::Busy,
                    format!("{MAX_REGISTERED} ranks are registered on this node already"),
                ));
            }
            if ranks.contains_key(&key) {
                return Err(WireError::new(
                    Code::Conflict,
                    format!("rank {rank} of job `{job}` is already registered on this node"),
                ));
            }
            ranks.insert(key.clone(), (id, accept));
        }
        self.changed.notify_waiters();
        Ok(Registration {
            registry: self.clone(),
            key,
            id,
        })
    }

    pub fn lookup(&self, job: &str, rank: u32) -> Option<Endpoint> {
        let ranks = self.ranks.lock().unwrap_or_else(|e| e.into_inner());
        ranks.get(&(job.to_string(), rank)).map(|(_, e)| e.clone())
    }

    pub fn len(&self) -> usize {
        self.ranks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The accept endpoint of `rank`, waiting up to `timeout` for it to register.
    pub async fn wait_for(
        &self,
        job: &str,
        rank: u32,
        timeout: Duration,
    ) -> Result<Endpoint, WireError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(e) = self.lookup(job, rank) {
                return Ok(e);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(WireError::new(
                    Code::RankNotRegistered,
                    format!(
                        "rank {rank} of job `{job}` did not register on this node within {:.0} s",
                        timeout.as_secs_f64()
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_for_a_late_rank_and_forgets_it_when_it_leaves() {
        let reg = Arc::new(Registry::default());
        let r2 = reg.clone();
        let waiter = tokio::spawn(async move { r2.wait_for("j", 1, Duration::from_secs(5)).await });
        tokio::task::yield_now().await;
        let guard = reg
            .register("j", 1, Endpoint::Tcp("127.0.0.1:9".into()))
            .unwrap();
        assert_eq!(
            waiter.await.unwrap().unwrap(),
            Endpoint::Tcp("127.0.0.1:9".into())
        );
        assert_eq!(
            reg.register("j", 1, Endpoint::Tcp("x:1".into()))
                .unwrap_err()
                .code,
            Code::Conflict
        );
        drop(guard);
        assert!(reg.lookup("j", 1).is_none());
        let e = reg
            .wait_for("j", 1, Duration::from_millis(20))
            .await
            .unwrap_err();
        assert_eq!(e.code, Code::RankNotRegistered);
    }
}
