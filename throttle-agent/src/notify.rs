//! systemd readiness (`Type=notify`): once every listener is bound, the agent tells the
//! service manager `READY=1` on `$NOTIFY_SOCKET` (a Unix datagram socket, `@` for the
//! abstract namespace), so `systemctl start` returns when the agent can be used and units
//! ordered after it start then. Without `$NOTIFY_SOCKET` nothing happens.

use std::os::unix::net::UnixDatagram;

/// Send `state` (e.g. `READY=1`, `RELOADING=1`, `STOPPING=1`) to the service manager;
/// `Ok(false)` when not run by one.
pub fn notify(state: &str) -> std::io::Result<bool> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET").filter(|p| !p.is_empty()) else {
        return Ok(false);
    };
    let sock = UnixDatagram::unbound()?;
    let bytes = path.as_encoded_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        sock.send_to_addr(state.as_bytes(), &addr)?;
    } else {
        sock.send_to(state.as_bytes(), std::path::Path::new(&path))?;
    }
    Ok(true)
}
