//! The socket operations the copy loop needs, for TCP and Unix streams alike.
//!
//! The pump works on `&S` (not `&mut S`) so both directions of a stream can run at once on
//! the same socket; this trait is the readiness-based surface tokio offers for that, plus
//! the raw-fd calls (half-close, abortive close, splice) that tokio does not wrap.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::SystemTime;

use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

/// A connected stream socket usable from two tasks at once.
pub trait Socket: AsRawFd + Send + Sync {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send;
    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send;
    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R>;
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn try_write(&self, buf: &[u8]) -> io::Result<usize>;
    /// Make the next close abortive (TCP RST) so the other end sees an error, not an EOF.
    fn set_abortive_close(&self) {}
}

impl Socket for TcpStream {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
        TcpStream::readable(self)
    }
    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send {
        TcpStream::writable(self)
    }
    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        TcpStream::try_io(self, interest, f)
    }
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        TcpStream::try_read(self, buf)
    }
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        TcpStream::try_write(self, buf)
    }
    fn set_abortive_close(&self) {
        reset_on_close(self.as_raw_fd());
    }
}

impl Socket for UnixStream {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
        UnixStream::readable(self)
    }
    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send {
        UnixStream::writable(self)
    }
    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        UnixStream::try_io(self, interest, f)
    }
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        UnixStream::try_read(self, buf)
    }
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        UnixStream::try_write(self, buf)
    }
}

/// Write all of `buf`, waiting for the socket as needed.
pub async fn write_all<S: Socket>(sock: &S, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        sock.writable().await?;
        match sock.try_write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Write all of `buf` with MSG_MORE: the kernel holds it to go out in one segment with
/// whatever is written next (used for frame headers, so header and payload travel together).
pub async fn write_all_more<S: Socket>(sock: &S, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        sock.writable().await?;
        let r = sock.try_io(tokio::io::Interest::WRITABLE, || {
            // SAFETY: send(2) on our socket fd with a valid buffer and length.
            let n = unsafe {
                libc::send(
                    sock.as_raw_fd(),
                    buf.as_ptr() as *const libc::c_void,
                    buf.len(),
                    libc::MSG_MORE | libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match r {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Read some bytes into `buf`; `Ok(0)` is end of stream.
///
/// A short read means the socket's buffer was drained, so readiness is cleared right away
/// instead of by a further read that would only return EAGAIN (one syscall less per
/// message; tokio keeps any readiness that arrived meanwhile).
pub async fn read_some<S: Socket>(sock: &S, buf: &mut [u8]) -> io::Result<usize> {
    read_stamped(sock, buf).await.map(|(n, _)| n)
}

/// Have the kernel stamp the data `sock` receives with its arrival time (SO_TIMESTAMPNS),
/// which [`read_stamped`] returns. Best effort: without it reads carry no stamp.
pub fn stamp_arrivals<S: Socket>(sock: &S) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt with a correctly sized int on a socket fd we own.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &on as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// [`read_some`], also returning when the last of the bytes read arrived at the socket,
/// where the socket stamps arrivals ([`stamp_arrivals`]).
pub async fn read_stamped<S: Socket>(
    sock: &S,
    buf: &mut [u8],
) -> io::Result<(usize, Option<SystemTime>)> {
    loop {
        sock.readable().await?;
        let mut got = 0usize;
        let mut stamp = None;
        let r = sock.try_io(tokio::io::Interest::READABLE, || {
            let (n, t) = recv_stamped(sock.as_raw_fd(), buf)?;
            got = n;
            stamp = t;
            if got > 0 && got < buf.len() {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                Ok(got)
            }
        });
        match r {
            Ok(n) => return Ok((n, stamp)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => return Ok((got, stamp)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// One recvmsg(2) into `buf`, with the SCM_TIMESTAMPNS stamp when there is one.
fn recv_stamped(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<SystemTime>)> {
    // Room for one control message holding a timespec (u64-aligned, as cmsghdr needs).
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid (no name, no iovecs, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: recvmsg into a buffer and a control area we exclusively borrow, both
    // described with their true lengths.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* macros walk the control area the kernel filled in, bounded by
    // msg_controllen; a timespec is read unaligned from the data of a message of our type.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const _);
                if ts.tv_sec > 0 && ts.tv_nsec >= 0 && ts.tv_nsec < 1_000_000_000 {
                    stamp = Some(
                        SystemTime::UNIX_EPOCH
                            + std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
                    );
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

/// Make closing the TCP socket `fd` send a reset (SO_LINGER on, timeout 0). A zero
/// linger never blocks the closing thread; it discards unsent data and sends RST.
pub fn reset_on_close(fd: RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt with a correctly sized `linger` on a socket fd we own.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Half-close: no more bytes will be written, reading continues.
pub fn shutdown_write<S: Socket>(sock: &S) {
    // SAFETY: shutdown(2) on a valid fd owned by `sock`; errors (e.g. ENOTCONN after the
    // peer vanished) are harmless here.
    unsafe {
        libc::shutdown(sock.as_raw_fd(), libc::SHUT_WR);
    }
}

/// A pipe used as the in-kernel buffer of one spliced direction.
#[derive(Debug)]
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
}

impl Pipe {
    /// A non-blocking pipe, enlarged to `want` bytes when the system allows.
    pub fn new(want: usize) -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 fills two fds on success, which we own from here on.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh fds from pipe2, not owned elsewhere.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on our own fd; failure (EPERM over the per-user limit) keeps the default.
        let set =
            unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, want as libc::c_int) };
        let capacity = if set > 0 {
            set as usize
        } else {
            // SAFETY: as above, a read-only query.
            let got = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
            if got > 0 {
                got as usize
            } else {
                4096
            }
        };
        Ok(Pipe {
            read,
            write,
            capacity,
        })
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    pub fn write_fd(&self) -> RawFd {
        self.write.as_raw_fd()
    }
}

/// One splice(2) call between two fds, non-blocking. `Ok(0)` means end of input.
pub fn splice_once(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: both fds are valid for the duration of the call; null offsets mean "use the
    // file position", which is what sockets and pipes require.
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Splice from a socket into `pipe`, at most `len` bytes, once the socket is readable.
pub async fn splice_in<S: Socket>(sock: &S, pipe: &Pipe, len: usize) -> io::Result<usize> {
    loop {
        sock.readable().await?;
        match sock.try_io(Interest::READABLE, || {
            splice_once(sock.as_raw_fd(), pipe.write_fd(), len)
        }) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Splice exactly `len` bytes from `pipe` into a socket.
pub async fn splice_out<S: Socket>(pipe: &Pipe, sock: &S, mut len: usize) -> io::Result<()> {
    while len > 0 {
        sock.writable().await?;
        match sock.try_io(Interest::WRITABLE, || {
            splice_once(pipe.read_fd(), sock.as_raw_fd(), len)
        }) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => len -= n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
