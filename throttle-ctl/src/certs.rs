//! Certificates for the agents' control API: a cluster CA and one certificate per agent.
//!
//! `throttle-ctl local up --tls` uses this so that the TLS path is exercised end to end
//! on one machine; on a real cluster the operator may use the same command's output as a
//! model or bring certificates from their own CA (agent: `--tls-cert/--tls-key`; cluster
//! file: `tls_ca`). Keys are written owner-only.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

/// A certificate authority held in memory while the cluster comes up.
pub struct ClusterCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// Files of one agent's certificate.
pub struct AgentCert {
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(text.as_bytes())?;
    Ok(())
}

impl ClusterCa {
    /// A fresh CA; its certificate is written to `dir/ca.pem` (the cluster file's `tls_ca`).
    pub fn create(dir: &Path) -> Result<(ClusterCa, PathBuf)> {
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| anyhow!("CA parameters: {e}"))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "throttle cluster CA");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().map_err(|e| anyhow!("CA key: {e}"))?;
        let cert = params
            .self_signed(&key)
            .map_err(|e| anyhow!("CA certificate: {e}"))?;
        let path = dir.join("ca.pem");
        std::fs::write(&path, cert.pem())
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok((ClusterCa { cert, key }, path))
    }

    /// A server certificate for the agent of `node`, valid for `ip`, written to
    /// `dir/NODE-cert.pem` and `dir/NODE-key.pem`.
    pub fn issue(&self, dir: &Path, node: &str, ip: IpAddr) -> Result<AgentCert> {
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| anyhow!("certificate parameters: {e}"))?;
        params.subject_alt_names = vec![SanType::IpAddress(ip)];
        params
            .distinguished_name
            .push(DnType::CommonName, format!("throttle agent {node}"));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().map_err(|e| anyhow!("agent key: {e}"))?;
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .map_err(|e| anyhow!("agent certificate: {e}"))?;
        let out = AgentCert {
            cert: dir.join(format!("{node}-cert.pem")),
            key: dir.join(format!("{node}-key.pem")),
        };
        std::fs::write(&out.cert, cert.pem())
            .with_context(|| format!("cannot write {}", out.cert.display()))?;
        write_private(&out.key, &key.serialize_pem())?;
        Ok(out)
    }
}
