//! C socket addresses to and from `SocketAddr`, with the family the program's socket has.

use libc::{c_int, sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage, socklen_t};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Read an IPv4 or IPv6 address (`None` for any other family or a short buffer).
///
/// # Safety
/// `addr` must point to at least `len` readable bytes (or be null).
pub unsafe fn read(addr: *const sockaddr, len: socklen_t) -> Option<SocketAddr> {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: at least the family's bytes are readable (checked above); the family is
    // the address's first field on Linux, and the program's buffer need not be aligned.
    let family = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sa_family_t>()) };
    match family as c_int {
        libc::AF_INET if len as usize >= std::mem::size_of::<sockaddr_in>() => {
            // SAFETY: `len` covers a sockaddr_in (checked by the guard).
            let a = unsafe { std::ptr::read_unaligned(addr as *const sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<sockaddr_in6>() => {
            // SAFETY: `len` covers a sockaddr_in6 (checked by the guard).
            let a = unsafe { std::ptr::read_unaligned(addr as *const sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// `addr` as the socket family `family` writes it: an IPv4 address on an IPv6 socket is
/// v4-mapped, a v4-mapped one on an IPv4 socket is plain.
pub fn for_family(addr: SocketAddr, family: c_int) -> SocketAddr {
    match (family, addr.ip()) {
        (libc::AF_INET6, IpAddr::V4(ip)) => {
            SocketAddr::V6(SocketAddrV6::new(ip.to_ipv6_mapped(), addr.port(), 0, 0))
        }
        (libc::AF_INET, ip @ IpAddr::V6(_)) => SocketAddr::new(ip.to_canonical(), addr.port()),
        _ => addr,
    }
}

/// `addr` as a C address: the storage and the length that is used of it.
pub fn to_c(addr: SocketAddr) -> (sockaddr_storage, socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut st: sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write(&mut st as *mut _ as *mut sockaddr_in, sin) };
            std::mem::size_of::<sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write(&mut st as *mut _ as *mut sockaddr_in6, sin6) };
            std::mem::size_of::<sockaddr_in6>()
        }
    };
    (st, len as socklen_t)
}

/// Write `addr` to a caller's buffer the way the kernel does: as much as fits, and the
/// full length in `*len`.
///
/// # Safety
/// `out` must point to `*len` writable bytes; `len` must be valid (or both null).
pub unsafe fn write(addr: SocketAddr, out: *mut sockaddr, len: *mut socklen_t) {
    if out.is_null() || len.is_null() {
        return;
    }
    let (st, full) = to_c(addr);
    // SAFETY: `len` is valid (the caller's contract, not null: checked above).
    let room = unsafe { *len };
    let n = room.min(full) as usize;
    // SAFETY: `out` has `room` >= `n` writable bytes; `st` has `full` >= `n`; a local
    // and the program's buffer do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(&st as *const _ as *const u8, out as *mut u8, n) };
    // SAFETY: as above.
    unsafe { *len = full };
}

/// The socket's own address (the real one, from the kernel).
pub fn local(fd: c_int) -> Option<SocketAddr> {
    // SAFETY: all-zero is a valid sockaddr_storage, and getsockname writes at most `len`.
    unsafe {
        let mut st: sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<sockaddr_storage>() as socklen_t;
        if libc::getsockname(fd, &mut st as *mut _ as *mut sockaddr, &mut len) != 0 {
            return None;
        }
        read(&st as *const _ as *const sockaddr, len)
    }
}

/// The socket's peer as the kernel knows it.
pub fn peer(fd: c_int) -> Option<SocketAddr> {
    // SAFETY: as in `local`.
    unsafe {
        let mut st: sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<sockaddr_storage>() as socklen_t;
        if (crate::real::real().getpeername)(fd, &mut st as *mut _ as *mut sockaddr, &mut len) != 0
        {
            return None;
        }
        read(&st as *const _ as *const sockaddr, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_and_truncate_like_the_kernel() {
        for a in [
            "198.18.0.2:5000",
            "[2001:2::1]:65535",
            "[::ffff:198.18.0.2]:1",
        ] {
            let a: SocketAddr = a.parse().unwrap();
            let (st, len) = to_c(a);
            assert_eq!(
                // SAFETY: `st` holds `len` bytes.
                unsafe { read(&st as *const _ as *const sockaddr, len) },
                Some(a)
            );
            assert_eq!(
                // SAFETY: `st` holds more than `len - 1` bytes.
                unsafe { read(&st as *const _ as *const sockaddr, len - 1) },
                None
            );
        }
        let a: SocketAddr = "198.18.0.2:5000".parse().unwrap();
        let mut small = [0u8; 4];
        let mut len: socklen_t = 4;
        // SAFETY: `small` has `len` (4) writable bytes.
        unsafe { write(a, small.as_mut_ptr() as *mut sockaddr, &mut len) };
        assert_eq!(len as usize, std::mem::size_of::<sockaddr_in>());
        assert_eq!(
            small[..2],
            (libc::AF_INET as libc::sa_family_t).to_ne_bytes()
        );
        assert_eq!(
            for_family(a, libc::AF_INET6),
            "[::ffff:198.18.0.2]:5000".parse().unwrap()
        );
        assert_eq!(
            for_family("[::ffff:198.18.0.2]:5000".parse().unwrap(), libc::AF_INET),
            a
        );
    }
}
