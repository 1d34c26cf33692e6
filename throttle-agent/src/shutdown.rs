//! The signal that an agent is stopping: each service holds one and returns when it fires.

use tokio::sync::watch;

/// A signal that the agent is stopping; each service holds one.
#[derive(Clone, Debug)]
pub struct Shutdown(pub(crate) watch::Receiver<bool>);

impl Shutdown {
    /// Resolve once shutdown was asked for.
    pub async fn wait(&mut self) {
        while !*self.0.borrow() {
            if self.0.changed().await.is_err() {
                return;
            }
        }
    }
}
