//! Another user on this machine, for the tests that play one: a command run as them, and
//! a listener of theirs. Both need root (the suite's CI runs as root); [`can_switch_user`]
//! says whether this machine can.

use std::net::SocketAddr;
use std::process::Command;

/// The user tests play: "nobody".
pub const NOBODY: u32 = 65534;

/// Whether tests can run something as another user here: root, and `setpriv`.
pub fn can_switch_user() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The words that run a program as `uid` (and the same gid, no supplementary groups):
/// `setpriv --reuid=U --regid=U --clear-groups`, to put in front of a program, also after
/// `ip netns exec NS`.
pub fn as_user_words(uid: u32) -> [String; 4] {
    [
        "setpriv".into(),
        format!("--reuid={uid}"),
        format!("--regid={uid}"),
        "--clear-groups".into(),
    ]
}

/// A command that runs `program` as `uid`: add its arguments.
pub fn as_user(uid: u32, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let [setpriv, reuid, regid, clear] = as_user_words(uid);
    let mut c = Command::new(setpriv);
    c.args([reuid, regid, clear]).arg(program);
    c
}

/// A listening TCP socket of another user, in a process of theirs; killed when dropped.
pub struct TheirListener {
    pid: libc::pid_t,
    /// Where it listens (the port the kernel chose, when asked for port 0).
    pub addr: SocketAddr,
}

impl Drop for TheirListener {
    fn drop(&mut self) {
        // SAFETY: the child is this process's own; killing and reaping it is all.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// A C socket address for `addr`, and its length.
fn to_c(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is a valid (unspecified) address.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably aligned.
            unsafe { std::ptr::write((&mut st as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in6 and suitably aligned.
            unsafe { std::ptr::write((&mut st as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (st, len as libc::socklen_t)
}

/// A listener of `uid` at `at` (port 0: any), from a forked process that became `uid`
/// (root only); `None` when that process could not (not root, the address taken).
pub fn listen_as(uid: u32, at: SocketAddr) -> Option<TheirListener> {
    let (st, len) = to_c(at);
    let family = if at.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let mut pipe = [0 as libc::c_int; 2];
    // SAFETY: two descriptors into a two-element array.
    if unsafe { libc::pipe(pipe.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: the child makes async-signal-safe system calls only, on values prepared
    // before the fork, and ends with _exit (or is killed).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(uid) != 0
                || libc::setuid(uid) != 0
            {
                libc::_exit(1);
            }
            let s = libc::socket(family, libc::SOCK_STREAM, 0);
            let one: libc::c_int = 1;
            libc::setsockopt(
                s,
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
            if libc::bind(s, (&st as *const libc::sockaddr_storage).cast(), len) != 0
                || libc::listen(s, 16) != 0
            {
                libc::_exit(2);
            }
            let mut bound: libc::sockaddr_storage = std::mem::zeroed();
            let mut blen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            libc::getsockname(
                s,
                (&mut bound as *mut libc::sockaddr_storage).cast(),
                &mut blen,
            );
            // Both families keep the port at the same offset, after the family.
            let port =
                (*(&bound as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>()).sin_port;
            libc::write(pipe[1], (&port as *const u16).cast(), 2);
            loop {
                libc::pause();
            }
        }
    }
    let mut port = [0u8; 2];
    // SAFETY: two bytes into a two-byte buffer; then our copies of the pipe closed.
    let got = unsafe {
        libc::close(pipe[1]);
        let got = libc::read(pipe[0], port.as_mut_ptr().cast(), 2);
        libc::close(pipe[0]);
        got
    };
    if got != 2 {
        // SAFETY: the child is this process's own: killed (if it still runs) and reaped.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        return None;
    }
    let mut addr = at;
    addr.set_port(u16::from_be_bytes(port));
    Some(TheirListener { pid, addr })
}
