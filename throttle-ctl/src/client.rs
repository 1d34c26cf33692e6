//! A small blocking client for one agent's control API.
//!
//! Turns transport failures and `{"error": ...}` answers into messages that name the
//! node and say what to do, so commands can simply `?` them.

use std::time::Duration;

use anyhow::{anyhow, Result};
use serde::de::DeserializeOwned;
use serde_json::Value;
use throttle_agent::api::Status;

use crate::cluster::{Cluster, Node};

pub struct AgentClient {
    node: String,
    base: String,
    auth: String,
    http: ureq::Agent,
}

impl AgentClient {
    pub fn new(cluster: &Cluster, node: &Node) -> AgentClient {
        Self::with_timeout(cluster, node, Duration::from_secs(10))
    }

    pub fn with_timeout(cluster: &Cluster, node: &Node, timeout: Duration) -> AgentClient {
        let mut http = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(3))
            .timeout(timeout);
        if let Some(tls) = &cluster.tls {
            http = http.tls_config(tls.clone());
        }
        AgentClient {
            node: node.name.clone(),
            base: cluster.control_url(node),
            auth: format!("Bearer {}", cluster.token.as_str()),
            http: http.build(),
        }
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        let req = self
            .http
            .request(method, &format!("{}{}", self.base, path))
            .set("Authorization", &self.auth);
        let result = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        match result {
            Ok(resp) => {
                if resp.status() == 204 {
                    return Ok(Value::Null);
                }
                resp.into_json::<Value>()
                    .map_err(|e| anyhow!("node `{}`: unreadable answer: {e}", self.node))
            }
            Err(ureq::Error::Status(code, resp)) => {
                let msg = resp
                    .into_json::<Value>()
                    .ok()
                    .and_then(|v| v["error"].as_str().map(str::to_string))
                    .unwrap_or_else(|| "no message".into());
                let hint = if code == 401 {
                    " (does the cluster file's token_file hold this cluster's token?)"
                } else {
                    ""
                };
                Err(anyhow!("node `{}`: {msg}{hint}", self.node))
            }
            Err(e) => Err(anyhow!(
                "node `{}`: agent at {} is unreachable: {e} (is it running? `throttle-ctl local up` starts a local cluster)",
                self.node,
                self.base
            )),
        }
    }

    fn typed<T: DeserializeOwned>(&self, v: Value) -> Result<T> {
        serde_json::from_value(v)
            .map_err(|e| anyhow!("node `{}`: unexpected answer: {e}", self.node))
    }

    pub fn status(&self) -> Result<Status> {
        let v = self.call("GET", "/status", None)?;
        self.typed(v)
    }

    pub fn set_shape(&self, body: &Value) -> Result<Status> {
        let v = self.call("PUT", "/shape", Some(body))?;
        self.typed(v)
    }

    pub fn put_cluster(&self, nodes: &Value) -> Result<()> {
        self.call("PUT", "/cluster", Some(nodes)).map(|_| ())
    }

    pub fn put_job(&self, job: &str, ranks: &[String]) -> Result<()> {
        self.call(
            "PUT",
            &format!("/jobs/{job}"),
            Some(&serde_json::json!({ "ranks": ranks })),
        )
        .map(|_| ())
    }

    pub fn delete_job(&self, job: &str) -> Result<()> {
        self.call("DELETE", &format!("/jobs/{job}"), None)
            .map(|_| ())
    }

    pub fn launch(&self, job: &str, spec: &Value) -> Result<Value> {
        self.call("POST", &format!("/jobs/{job}/launch"), Some(spec))
    }

    /// Extend the lease of `job` on this node.
    pub fn renew(&self, job: &str) -> Result<()> {
        self.call("POST", &format!("/jobs/{job}/renew"), None)
            .map(|_| ())
    }

    /// Names of every job this node holds (launched, or only a rank map).
    pub fn job_names(&self) -> Result<Vec<String>> {
        let v = self.call("GET", "/jobs", None)?;
        let mut names: Vec<String> = v["jobs"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        if let Some(launched) = v["launched"].as_array() {
            names.extend(
                launched
                    .iter()
                    .filter_map(|j| j["job"].as_str().map(str::to_string)),
            );
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    pub fn job_report(&self, job: &str) -> Result<throttle_agent::jobs::JobReport> {
        let v = self.call("GET", &format!("/jobs/{job}"), None)?;
        self.typed(v)
    }

    pub fn add_forward(&self, body: &Value) -> Result<Value> {
        self.call("POST", "/forwards", Some(body))
    }

    pub fn list_forwards(&self) -> Result<Value> {
        self.call("GET", "/forwards", None)
    }

    pub fn remove_forward(&self, id: u64) -> Result<()> {
        self.call("DELETE", &format!("/forwards/{id}"), None)
            .map(|_| ())
    }

    pub fn calibrate(&self, to: &str, seconds: f64) -> Result<Value> {
        self.call(
            "POST",
            "/calibrate",
            Some(&serde_json::json!({ "to": to, "seconds": seconds })),
        )
    }
}
