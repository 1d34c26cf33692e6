//! The socket options interception needs and tokio does not wrap: the original
//! destination of a redirected connection, socket marks, and transparent sockets; and the
//! one reader of an option into a value ([`get`]).

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};

/// Mark on the agent's own outgoing sockets (to other agents): the redirect rule skips them.
pub const EXEMPT_MARK: u32 = 0x5448_0001;
/// Mark on the transparent sockets that deliver an intercepted connection on the receiving
/// node: their connections' replies are routed back into this host (policy routing table
/// [`crate::intercept::netfilter::ROUTE_TABLE`]) instead of out to the node whose address they carry.
pub const TRANSPARENT_MARK: u32 = 0x5448_0002;

/// Set an `int` socket option (the one writer of those, as [`get`] is the one reader).
pub fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: u32,
) -> io::Result<()> {
    let v = value as libc::c_int;
    // SAFETY: setsockopt with a correctly sized int on a socket fd the caller owns.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A socket option read into a value of type `T`, which starts all zero (what the kernel
/// does not fill stays so).
///
/// # Safety
/// `T` is plain data that the option `level`/`name` fills: all-zero bytes, and any bytes
/// the kernel writes, are a valid `T` (an integer, `ucred`, `tcp_info`).
pub unsafe fn get<T>(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
    // SAFETY: the caller promises all-zero is a valid T.
    let mut v: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `v`, which is that large.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut v as *mut T as *mut libc::c_void,
            &mut len,
        )
    };
    if r == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Put `mark` on the socket's packets (SO_MARK; needs CAP_NET_ADMIN).
pub fn set_mark(sock: &impl AsRawFd, mark: u32) -> io::Result<()> {
    setsockopt_int(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_MARK, mark)
}

/// Let the socket bind to an address that is not this host's (IP_TRANSPARENT; needs
/// CAP_NET_ADMIN).
pub fn set_transparent(sock: &impl AsRawFd) -> io::Result<()> {
    setsockopt_int(sock.as_raw_fd(), libc::SOL_IP, libc::IP_TRANSPARENT, 1)
}

/// Where a connection that the kernel redirected to us was going (SO_ORIGINAL_DST, IPv4).
pub fn original_destination(sock: &impl AsRawFd) -> io::Result<SocketAddr> {
    // SAFETY: an all-zero sockaddr_in is a valid value to be overwritten.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `addr`, which is that large.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_IP,
            libc::SO_ORIGINAL_DST,
            &mut addr as *mut libc::sockaddr_in as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    if addr.sin_family != libc::AF_INET as libc::sa_family_t {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the original destination is not an IPv4 address",
        ));
    }
    Ok(SocketAddr::V4(SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr)),
        u16::from_be(addr.sin_port),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_nobody_redirected_reports_no_other_destination() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        // Without connection tracking the kernel has nothing to say (ENOENT, ENOPROTOOPT);
        // with it, an un-NATed connection's original destination is where it arrived.
        // Never an address made up.
        match original_destination(&s) {
            Err(_) => {}
            Ok(a) => assert_eq!(a, l.local_addr().unwrap()),
        }
        drop(c);
    }
}
