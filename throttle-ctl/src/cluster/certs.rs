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

/// How long the certificates of `local up --tls` are valid, from the day before they
/// are made (a clock a little behind still takes them): a test cluster's life, not the
/// years rcgen gives by default (1975 to 4096).
pub const VALID_DAYS: i64 = 90;

/// Set `params` valid from yesterday for [`VALID_DAYS`].
fn bounded(params: &mut CertificateParams) -> Result<()> {
    let day = |offset: i64| -> Result<(i32, u8, u8)> {
        let d = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_hours(24 * offset))
            .map_err(|e| anyhow!("a date: {e}"))?
            .to_zoned(jiff::tz::TimeZone::UTC)
            .date();
        Ok((i32::from(d.year()), d.month() as u8, d.day() as u8))
    };
    let (y, m, d) = day(-1)?;
    params.not_before = rcgen::date_time_ymd(y, m, d);
    let (y, m, d) = day(VALID_DAYS)?;
    params.not_after = rcgen::date_time_ymd(y, m, d);
    Ok(())
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
        bounded(&mut params)?;
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
        bounded(&mut params)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 35, finding 11: the certificates of `local up --tls` are valid from the day
    /// before they are made for [`VALID_DAYS`], not from 1975 to 4096 (read back by
    /// openssl, as a client would).
    #[test]
    fn certificates_are_valid_for_a_bounded_time() {
        let dir = std::env::temp_dir().join(format!("throttle-certs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (ca, ca_path) = ClusterCa::create(&dir).unwrap();
        let agent = ca.issue(&dir, "n0", "127.0.0.1".parse().unwrap()).unwrap();
        let now = jiff::Timestamp::now().as_second();
        for pem in [&ca_path, &agent.cert] {
            let out = std::process::Command::new("openssl")
                .args([
                    "x509",
                    "-noout",
                    "-startdate",
                    "-enddate",
                    "-dateopt",
                    "iso_8601",
                    "-in",
                ])
                .arg(pem)
                .output()
                .expect("openssl");
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            let at = |key: &str| -> i64 {
                let line = text
                    .lines()
                    .find_map(|l| l.strip_prefix(key))
                    .unwrap_or_else(|| panic!("{text}"));
                line.trim()
                    .replace(' ', "T")
                    .parse::<jiff::Timestamp>()
                    .unwrap()
                    .as_second()
            };
            let (from, to) = (at("notBefore="), at("notAfter="));
            let day = 86_400;
            assert!(from <= now && now - from <= 2 * day, "{text}");
            assert!(to > now && to - now <= (VALID_DAYS + 1) * day, "{text}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
