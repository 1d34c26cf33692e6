//! The cluster file: which nodes exist, where their agents listen, and the token.
//!
//! Written by `throttle-ctl local up` (or by hand for a real cluster) and read by every
//! other command. Default `throttle-cluster.toml` in the working directory; `--cluster`
//! or `THROTTLE_CLUSTER` override it.

pub mod agent_client;
pub mod certs;
pub mod directory;
pub mod hostlist;
pub mod local;
pub mod netns;
pub mod slurm;

use std::path::{Path, PathBuf};

use std::net::SocketAddr;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use throttle_proto::auth::Token;
use throttle_proto::{Name, Rate};

pub const DEFAULT_PATH: &str = "throttle-cluster.toml";

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// File holding the token (relative paths are relative to the cluster file).
    pub token_file: PathBuf,
    /// Link capacity of every node, e.g. "1 Gbit/s".
    #[serde(serialize_with = "rate_text", deserialize_with = "rate_from_text")]
    pub capacity: Rate,
    /// Directory of a local cluster's state (sockets, logs); absent for real clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_dir: Option<PathBuf>,
    /// PEM certificate of the authority that signed the agents' control-API certificates:
    /// when set, the controller talks HTTPS to the agents and checks their certificates
    /// (relative paths are relative to the cluster file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// A local cluster of namespace hosts (`local up --netns`): what `local down` removes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<NamespaceHosts>,
    /// `local up --pin`: the CPUs a node's ranks run on, the agents' left to them;
    /// `throttle-ctl exec` runs a command's processes there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_cpus: Option<throttle_proto::cpus::CpuList>,
    #[serde(rename = "node")]
    pub nodes: Vec<Node>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub name: Name,
    /// Control API address.
    pub control: SocketAddr,
    /// Data port address (agent to agent).
    pub data: SocketAddr,
    /// The agent's local endpoint (Unix socket) on that node.
    pub socket: PathBuf,
    /// Process id, for agents started by `local up`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The node's network namespace, for namespace hosts (`throttle-ctl exec` enters it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// The node's address, where its programs listen and other nodes reach them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<std::net::IpAddr>,
    /// The agent's preload port, where the preload library in the node's programs hands
    /// over their connections (a loopback cluster's nodes: `throttle-ctl exec` names it in
    /// THROTTLE_PRELOAD_AGENT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preload: Option<SocketAddr>,
}

/// The namespaces, links and bridge of a namespace-host cluster.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NamespaceHosts {
    /// Tag in the names: namespaces `throttle-TAG-nI`, bridge `thrTAG`.
    pub tag: String,
    /// The /24 of 198.18.0.0/15 the nodes live in.
    pub subnet: std::net::Ipv4Addr,
    /// This host's address on the bridge.
    pub host_address: std::net::Ipv4Addr,
    /// Number of namespaces (nodes), also before the agents were started.
    pub nodes: usize,
    /// How the agents intercept programs' connections: `kernel` (nftables redirect) or
    /// `preload` (the library; `throttle-ctl exec` then loads it into the commands).
    #[serde(default = "kernel_mode")]
    pub intercept: crate::intercept::Mode,
}

fn kernel_mode() -> crate::intercept::Mode {
    crate::intercept::Mode::Kernel
}

/// Write a fresh token to `path` (mode 600 from the start; an old file there is replaced).
pub fn write_new_token(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let token = Token::generate().map_err(|e| anyhow!(e))?;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write the token file {}", path.display()))?;
    std::io::Write::write_all(&mut f, token.as_str().as_bytes())?;
    Ok(())
}

/// The token from the file a cluster file names. It is sent, as a bearer token, to the
/// addresses the same file names, so a hostile cluster file could name any of the user's
/// secrets: the file must be the caller's own, readable by nobody else, not a symbolic
/// link, and hold a token's shape (`Token::new`). A secret of that shape still passes
/// (ARCHITECTURE.md, threat model).
fn load_token_file(path: &Path) -> Result<Token> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // Opened once, not through a symbolic link, and checked on the open file: a link
    // swapped between a check and the read cannot slip another file in.
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => bail!(
            "the token file {} is a symbolic link: name the file itself (a cluster file from someone else may name a link to have another file sent to its addresses)",
            path.display()
        ),
        // Token::load says what is missing and how to make one.
        Err(_) => return Token::load(path).map_err(|e| anyhow!("{e}")),
    };
    let meta = file.metadata()?;
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        bail!(
            "the token file {} belongs to uid {}, not to you (uid {me}): a cluster's token file is its user's own (a cluster file from someone else may name another file to have it sent to its addresses)",
            path.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o077 != 0 {
        bail!(
            "the token file {} is readable or writable by others (mode {:o}): whoever reads it controls the agents; `chmod 600 {}`",
            path.display(),
            meta.mode() & 0o777,
            path.display()
        );
    }
    let mut text = String::new();
    (&mut file)
        .take(64 * 1024)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read the token file {}", path.display()))?;
    Token::new(&text).map_err(|e| anyhow!("token file {}: {e}", path.display()))
}

/// A loaded cluster: the file, where it was, the token, and the TLS trust for the agents.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub path: PathBuf,
    pub file: ClusterFile,
    pub token: Token,
    /// Client TLS configuration trusting `tls_ca` (None: plain HTTP).
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

/// The capacity is written as people write rates (`1 Gbit/s`), not as bytes per second.
fn rate_text<S: Serializer>(r: &Rate, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(r)
}

fn rate_from_text<'de, D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
    Rate::deserialize(d)
}

impl ClusterFile {
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = format!(
            "# throttle cluster file: nodes, their agents' addresses, and the token file.\n{}",
            toml::to_string_pretty(self)?
        );
        // Whole or not at all, through no link another user planted in a shared directory,
        // and writable by nobody else (`read_file` refuses one that is).
        let (dir, name) = crate::shared_dir::in_shared_dir(path)?;
        dir.write_atomically(&name, text.as_bytes(), 0o644)?;
        Ok(())
    }
}

impl Cluster {
    /// Read and check the cluster file at `path`.
    pub fn load(path: &Path) -> Result<Cluster> {
        let text = read_file(path)?.ok_or_else(|| {
            anyhow!(
                "no cluster file at {}: start a local cluster with `throttle-ctl local up --nodes 4`, or pass --cluster FILE",
                path.display()
            )
        })?;
        let file: ClusterFile = toml::from_str(&text)
            .map_err(|e| anyhow!("the cluster file {} is not valid: {e}", path.display()))?;
        if file.nodes.is_empty() {
            bail!("the cluster file {} lists no nodes", path.display());
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let token_path = base.join(&file.token_file);
        let token = load_token_file(&token_path)?;
        let tls = match &file.tls_ca {
            Some(ca) => Some(client_tls(&base.join(ca))?),
            None => None,
        };
        Ok(Cluster {
            path: path.to_path_buf(),
            file,
            token,
            tls,
        })
    }

    /// The token file (the cluster file's `token_file`, relative to the cluster file).
    pub fn token_path(&self) -> PathBuf {
        self.path
            .parent()
            .unwrap_or(Path::new("."))
            .join(&self.file.token_file)
    }

    /// The base URL of a node's control API.
    pub fn control_url(&self, node: &Node) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", node.control)
    }

    /// The node called `name`, or whose address, control or data address is `name`
    /// (Open MPI's hostfile may list either).
    pub fn node_by_name_or_address(&self, name: &str) -> Result<&Node> {
        let as_ip: Option<std::net::IpAddr> = name.parse().ok();
        if let Some(ip) = as_ip {
            if let Some(n) = self
                .file
                .nodes
                .iter()
                .find(|n| n.address == Some(ip) || n.data.ip() == ip || n.control.ip() == ip)
            {
                return Ok(n);
            }
            bail!(
                "no node of the cluster file {} has the address {ip}",
                self.path.display()
            );
        }
        self.node(name)
    }

    /// The node called `name`, or an error listing the known ones.
    pub fn node(&self, name: &str) -> Result<&Node> {
        if !throttle_proto::name::is_valid(name) {
            bail!("`{}` is not a node name", name.escape_debug());
        }
        self.file
            .nodes
            .iter()
            .find(|n| n.name.as_str() == name)
            .ok_or_else(|| {
                anyhow!(
                    "unknown node `{name}`: the cluster file {} lists {}",
                    self.path.display(),
                    self.node_names().join(", ")
                )
            })
    }

    pub fn node_names(&self) -> Vec<String> {
        self.file.nodes.iter().map(|n| n.name.to_string()).collect()
    }

    /// The nodes a command applies to: one by name, or all.
    /// One node (by name or address, as `exec` and hostfiles name them), or all of them.
    pub fn select(&self, name: Option<&str>) -> Result<Vec<&Node>> {
        match name {
            Some(n) => Ok(vec![self.node_by_name_or_address(n)?]),
            None => Ok(self.file.nodes.iter().collect()),
        }
    }
}

/// A TLS client configuration that trusts the certificates in the PEM file `ca` (and
/// nothing else).
pub fn client_tls(ca: &Path) -> Result<std::sync::Arc<rustls::ClientConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(ca)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            anyhow!(
                "cannot read the cluster's CA certificate {}: {e}",
                ca.display()
            )
        })?;
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots
            .add(c)
            .map_err(|e| anyhow!("{}: not a usable CA certificate: {e}", ca.display()))?;
    }
    if roots.is_empty() {
        bail!("{} holds no PEM certificate", ca.display());
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow!("TLS setup: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(std::sync::Arc::new(config))
}

/// Where the cluster file is: the flag, then `THROTTLE_CLUSTER`, then the default.
/// The text of the cluster file at `path` (`None` where there is none): a regular file
/// of this user's (or root's) that nobody else may write, read without following a link
/// in its name. A cluster file says where the token goes and which processes and
/// directories `local down` stops and removes: one another user planted in a shared
/// working directory (found there without `--cluster`) would send the token, or a secret
/// of the caller's named as it, to that user's listener.
pub fn read_file(path: &Path) -> Result<Option<String>> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => bail!(
            "the cluster file {} is a symbolic link: throttle-ctl reads only the file itself (pass the file it points to with --cluster)",
            path.display()
        ),
        Err(e) => bail!("cannot read the cluster file {}: {e}", path.display()),
    };
    let m = f
        .metadata()
        .map_err(|e| anyhow!("cannot stat the cluster file {}: {e}", path.display()))?;
    let me = nix::unistd::geteuid().as_raw();
    if !m.is_file() {
        bail!("the cluster file {} is not a regular file", path.display());
    }
    if m.uid() != me && m.uid() != 0 {
        bail!(
            "the cluster file {} belongs to another user (uid {}): it names where the token is sent, so throttle-ctl reads only your own (or root's); pass yours with --cluster",
            path.display(),
            m.uid()
        );
    }
    if m.mode() & 0o022 != 0 {
        bail!(
            "the cluster file {} may be written by other users (mode {:o}): it names where the token is sent; `chmod go-w` it",
            path.display(),
            m.mode() & 0o7777
        );
    }
    let mut text = String::new();
    f.read_to_string(&mut text)
        .map_err(|e| anyhow!("cannot read the cluster file {}: {e}", path.display()))?;
    Ok(Some(text))
}

/// The cluster file: `--cluster`, else `$THROTTLE_CLUSTER` when set and not empty (an
/// empty variable is unset, as the shell's `${VAR:-default}` reads it), else the default.
pub fn resolve_path(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| {
        std::env::var_os("THROTTLE_CLUSTER")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
    .unwrap_or_else(|| PathBuf::from(DEFAULT_PATH))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reports_problems() {
        let dir = std::env::temp_dir().join(format!("throttle-cf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("token"), "0123456789abcdef0123").unwrap();
        set_mode(&dir.join("token"), 0o600);
        let file = ClusterFile {
            token_file: "token".into(),
            capacity: Rate::parse("1Gbit").unwrap(),
            local_dir: None,
            tls_ca: None,
            namespaces: None,
            rank_cpus: None,
            nodes: vec![Node {
                name: Name::parse("node", "n0").unwrap(),
                control: "127.0.0.1:1".parse().unwrap(),
                data: "127.0.0.1:2".parse().unwrap(),
                socket: "/tmp/n0.sock".into(),
                pid: Some(5),
                netns: None,
                address: None,
                preload: None,
            }],
        };
        let path = dir.join("c.toml");
        file.write(&path).unwrap();
        let c = Cluster::load(&path).unwrap();
        assert_eq!(c.file, file);
        assert!(c.node("n3").unwrap_err().to_string().contains("lists n0"));
        std::fs::write(&path, "nodes = 3").unwrap();
        assert!(Cluster::load(&path)
            .unwrap_err()
            .to_string()
            .contains("not valid"));
        let missing = Cluster::load(&dir.join("none.toml"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("local up"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn set_mode(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_cluster_file_cannot_have_another_file_sent_as_its_token() {
        let dir = std::env::temp_dir().join(format!("throttle-cf-evil-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cluster = |token_file: &str| {
            let path = dir.join("evil.toml");
            std::fs::write(
                &path,
                format!(
                    "token_file = \"{token_file}\"\ncapacity = \"1 Gbit/s\"\n[[node]]\nname = \"n0\"\ncontrol = \"127.0.70.99:18080\"\ndata = \"127.0.70.99:18081\"\nsocket = \"/tmp/evil.sock\"\n"
                ),
            )
            .unwrap();
            Cluster::load(&path).map(|_| ()).unwrap_err().to_string()
        };
        // The user's credentials, private as such files are: not a token's shape.
        let creds = dir.join("git-credentials");
        std::fs::write(&creds, "https://alice:ghp_0123456789abcdef@github.com\n").unwrap();
        set_mode(&creds, 0o600);
        let e = cluster(creds.to_str().unwrap());
        assert!(e.contains("this is not a token"), "{e}");
        // A token others can read is refused, with the fix.
        let token = dir.join("token");
        std::fs::write(&token, "0123456789abcdef0123").unwrap();
        set_mode(&token, 0o644);
        let e = cluster("token");
        assert!(e.contains("chmod 600"), "{e}");
        // A link to the token (which a hostile file could swap) is refused.
        set_mode(&token, 0o600);
        std::os::unix::fs::symlink(&token, dir.join("link")).unwrap();
        let e = cluster("link");
        assert!(e.contains("symbolic link"), "{e}");
        // Someone else's file (as root: one given to nobody) is refused too.
        if nix::unistd::geteuid().is_root() {
            set_mode(&token, 0o600);
            std::os::unix::fs::chown(&token, Some(65534), None).unwrap();
            let e = cluster("token");
            assert!(e.contains("belongs to uid 65534"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
