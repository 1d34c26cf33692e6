//! The kernel calls of kernel-paced links: another process's socket taken for a moment
//! (`pidfd_getfd`), its pacing rate set (`SO_MAX_PACING_RATE`) and its counters read
//! (`TCP_INFO`), and who is at the other end of a Unix socket (`SO_PEERCRED`,
//! `SO_PEERPIDFD`).
//!
//! Linux paces a TCP socket at `SO_MAX_PACING_RATE` by itself, with its own timer and
//! without the `fq` qdisc, in softirq context: no process needs a CPU when a byte is due.
//! The agent only sets the rate. It never keeps the program's socket open: a copy it
//! held would keep the connection alive after the program closed it (the FIN would wait
//! for the agent's close). Each use takes a fresh copy ([`Taken`]) and closes it at once.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::sockopt;

/// `SO_PEERPIDFD` (Linux 6.5): a pidfd of the process at the other end of a Unix socket.
const SO_PEERPIDFD: libc::c_int = 77;

fn last() -> io::Error {
    io::Error::last_os_error()
}

/// A pidfd for the process at the other end of the Unix socket `unix` (`SO_PEERPIDFD`,
/// Linux 6.5: it names the process that connected, even if its pid was reused since), and
/// that process's user and pid as `SO_PEERCRED` reports them. A kernel without
/// `SO_PEERPIDFD` is an error: `pidfd_open` of the reported pid could name another
/// process by then.
pub fn peer_process(unix: &impl AsRawFd) -> io::Result<(OwnedFd, u32, i32)> {
    let fd = unix.as_raw_fd();
    // SAFETY: SO_PEERCRED fills a ucred, plain integers.
    let cred: libc::ucred = unsafe { sockopt::get(fd, libc::SOL_SOCKET, libc::SO_PEERCRED) }?;
    // SAFETY: SO_PEERPIDFD fills an int (a new descriptor we then own).
    let pidfd: libc::c_int = unsafe { sockopt::get(fd, libc::SOL_SOCKET, SO_PEERPIDFD) }?;
    if pidfd < 0 {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    // SAFETY: a descriptor just returned to us, owned by nobody else.
    Ok((unsafe { OwnedFd::from_raw_fd(pidfd) }, cred.uid, cred.pid))
}

/// A copy of another process's descriptor, closed when dropped (at once, by design).
pub struct Taken(OwnedFd);

impl AsRawFd for Taken {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Take a copy of descriptor `fd` of the process `pidfd` stands for (the kernel checks
/// that this process may trace it: the same user, or root). `ESRCH` once the process is
/// gone, `EBADF` once it closed `fd`.
pub fn take(pidfd: &OwnedFd, fd: i32) -> io::Result<Taken> {
    // SAFETY: pidfd_getfd takes a pidfd, a descriptor number and flags, and returns a
    // new descriptor (close-on-exec) or -1.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if r < 0 {
        return Err(last());
    }
    // SAFETY: a descriptor just returned to us, owned by nobody else.
    Ok(Taken(unsafe { OwnedFd::from_raw_fd(r as RawFd) }))
}

/// The socket's inode and the user who created it (the file-system user of the process
/// that made it), or `None` when the descriptor is not a socket.
pub fn socket_owner(fd: &impl AsRawFd) -> Option<(u64, u32)> {
    // SAFETY: all-zero is a valid stat, and fstat writes one.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0
        || st.st_mode & libc::S_IFMT != libc::S_IFSOCK
    {
        return None;
    }
    Some((st.st_ino, st.st_uid))
}

/// The socket's inode (what identifies it whatever descriptor number it has), or `None`
/// when the descriptor is not a socket.
pub fn inode(fd: &impl AsRawFd) -> Option<u64> {
    // SAFETY: all-zero is a valid stat, and fstat writes one.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0
        || st.st_mode & libc::S_IFMT != libc::S_IFSOCK
    {
        return None;
    }
    Some(st.st_ino)
}

/// What identifies the process a pidfd stands for: its inode (unique per process where
/// pidfds live in their own file system, Linux 6.9 and later; elsewhere the inode all
/// pidfds share, which tells nothing: `None` then is not distinguished from it, and the
/// caller keeps one pidfd per registration).
pub fn process_key(pidfd: &OwnedFd) -> u64 {
    // SAFETY: all-zero is a valid stat, and fstat writes one.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat.
    if unsafe { libc::fstat(pidfd.as_raw_fd(), &mut st) } != 0 {
        return 0;
    }
    st.st_ino
}

/// Whether pidfds of different processes have different inodes here (pidfs): asked once,
/// of this process's own pidfd and its parent's.
pub fn distinct_pidfds() -> bool {
    static DISTINCT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DISTINCT.get_or_init(|| {
        let open = |pid: libc::pid_t| {
            // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            // SAFETY: a descriptor just returned to us, owned by nobody else.
            (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
        };
        // SAFETY: getpid and getppid cannot fail.
        let (me, parent) = unsafe { (libc::getpid(), libc::getppid()) };
        match (open(me), open(parent)) {
            (Some(a), Some(b)) => {
                let (ka, kb) = (process_key(&a), process_key(&b));
                ka != 0 && kb != 0 && ka != kb
            }
            _ => false,
        }
    })
}

/// Whether the socket is a TCP one (`SO_PROTOCOL`).
pub fn is_tcp(fd: &impl AsRawFd) -> bool {
    // SAFETY: SO_PROTOCOL fills an int.
    let protocol =
        unsafe { sockopt::get::<libc::c_int>(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PROTOCOL) };
    protocol.is_ok_and(|p| p == libc::IPPROTO_TCP)
}

/// Pace the socket's sending side at `bytes_per_sec` (`None`: unlimited).
pub fn set_pacing_rate(fd: &impl AsRawFd, bytes_per_sec: Option<u64>) -> io::Result<()> {
    let v: u64 = bytes_per_sec.unwrap_or(u64::MAX);
    // SAFETY: SO_MAX_PACING_RATE takes an unsigned long (8 bytes here) by pointer.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            &v as *const u64 as *const libc::c_void,
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(last())
    }
}

/// Put the socket's packets into a queue of the device (`SO_PRIORITY`: a class id of its
/// root qdisc; above 6 it needs CAP_NET_ADMIN).
pub fn set_priority(fd: &impl AsRawFd, priority: u32) -> io::Result<()> {
    sockopt::setsockopt_int(
        fd.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_PRIORITY,
        priority,
    )
}

/// What the agent reads of a paced socket's `TCP_INFO`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpCounters {
    /// `TCP_ESTABLISHED` and the others, as the kernel numbers them.
    pub state: u8,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    /// Bytes written and not yet sent, and segments sent and not yet acknowledged.
    pub notsent: u32,
    pub unacked: u32,
    pub max_pacing_rate: u64,
    /// Microseconds the socket was limited by the peer's receive window, and by its own
    /// send buffer.
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
}

/// `TCP_ESTABLISHED` in `TcpCounters::state`.
pub const ESTABLISHED: u8 = 1;
/// `TCP_SYN_SENT`: a connect under way.
pub const SYN_SENT: u8 = 2;

/// The socket's counters.
pub fn counters(fd: &impl AsRawFd) -> io::Result<TcpCounters> {
    // SAFETY: TCP_INFO fills a tcp_info, plain integers (the kernel fills what it knows).
    let i: libc::tcp_info =
        unsafe { sockopt::get(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO) }?;
    Ok(TcpCounters {
        state: i.tcpi_state,
        bytes_acked: i.tcpi_bytes_acked,
        bytes_received: i.tcpi_bytes_received,
        notsent: i.tcpi_notsent_bytes,
        unacked: i.tcpi_unacked,
        max_pacing_rate: i.tcpi_max_pacing_rate,
        rwnd_limited_us: i.tcpi_rwnd_limited,
        sndbuf_limited_us: i.tcpi_sndbuf_limited,
    })
}

/// The socket's peer, once connected.
pub fn peer(fd: &impl AsRawFd) -> Option<std::net::SocketAddr> {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getpeername writes at most `len` bytes into `st`.
    let r = unsafe {
        libc::getpeername(
            fd.as_raw_fd(),
            &mut st as *mut libc::sockaddr_storage as *mut libc::sockaddr,
            &mut len,
        )
    };
    if r != 0 {
        return None;
    }
    match st.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the kernel wrote a sockaddr_in.
            let a: libc::sockaddr_in = unsafe { std::ptr::read(&st as *const _ as *const _) };
            Some(std::net::SocketAddr::new(
                std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)).into(),
                u16::from_be(a.sin_port),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: the kernel wrote a sockaddr_in6.
            let a: libc::sockaddr_in6 = unsafe { std::ptr::read(&st as *const _ as *const _) };
            Some(std::net::SocketAddr::new(
                std::net::Ipv6Addr::from(a.sin6_addr.s6_addr).into(),
                u16::from_be(a.sin6_port),
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_socket_of_this_process_is_taken_paced_and_read() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        // SAFETY: pidfd_open of this very process.
        let me = unsafe { libc::syscall(libc::SYS_pidfd_open, std::process::id(), 0) };
        assert!(me >= 0, "pidfd_open: {}", last());
        // SAFETY: a descriptor just returned to us.
        let me = unsafe { OwnedFd::from_raw_fd(me as RawFd) };
        let copy = take(&me, client.as_raw_fd()).unwrap();
        assert_eq!(inode(&copy), inode(&client));
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        assert_eq!(
            socket_owner(&copy).map(|(_, u)| u),
            Some(uid),
            "its creator"
        );
        assert!(is_tcp(&copy));
        assert_eq!(peer(&copy), Some(listener.local_addr().unwrap()));
        set_pacing_rate(&copy, Some(1_000_000)).unwrap();
        drop(copy);
        client.write_all(&[1u8; 1000]).unwrap();
        let mut b = [0u8; 1000];
        server.read_exact(&mut b).unwrap();
        let c = counters(&client).unwrap();
        assert_eq!(c.state, ESTABLISHED);
        assert_eq!(
            c.max_pacing_rate, 1_000_000,
            "the rate set through the copy"
        );
        // Two pidfds of one process name the same process where pidfds are told apart.
        // SAFETY: pidfd_open of this very process.
        let again = unsafe { libc::syscall(libc::SYS_pidfd_open, std::process::id(), 0) };
        // SAFETY: a descriptor just returned to us.
        let again = unsafe { OwnedFd::from_raw_fd(again as RawFd) };
        if distinct_pidfds() {
            assert_eq!(process_key(&me), process_key(&again));
        }
        // A closed descriptor cannot be taken.
        let fd = server.as_raw_fd();
        drop(server);
        assert_eq!(
            take(&me, fd).err().and_then(|e| e.raw_os_error()),
            Some(libc::EBADF)
        );
    }
}
