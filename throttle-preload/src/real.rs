//! The C library's own socket calls, found behind this library with `dlsym(RTLD_NEXT)`.
//!
//! Every call this library makes on the program's behalf, and on its own sockets, goes to
//! these: calling `libc::connect` from in here would come back to our own `connect`.

use libc::{c_int, c_void, sockaddr, socklen_t};
use std::sync::OnceLock;

type Connect = unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int;
type Accept = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
type Accept4 = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int;
type GetName = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
type GetSockOpt = unsafe extern "C" fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int;
type Close = unsafe extern "C" fn(c_int) -> c_int;
type Bind = unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int;
type Ioctl = unsafe extern "C" fn(c_int, libc::c_ulong, ...) -> c_int;
type GetIfAddrs = unsafe extern "C" fn(*mut *mut libc::ifaddrs) -> c_int;

/// The next definitions of the calls this library interposes.
pub struct Real {
    pub connect: Connect,
    pub accept: Accept,
    pub accept4: Accept4,
    pub getpeername: GetName,
    pub getsockopt: GetSockOpt,
    pub close: Close,
    pub bind: Bind,
    pub ioctl: Ioctl,
    pub getifaddrs: GetIfAddrs,
}

static REAL: OnceLock<Real> = OnceLock::new();

/// The C library's definitions (looked up once).
pub fn real() -> &'static Real {
    REAL.get_or_init(|| {
        // SAFETY: each name is the C library's function of exactly the type it is cast to.
        unsafe {
            Real {
                connect: std::mem::transmute::<*mut c_void, Connect>(next(c"connect")),
                accept: std::mem::transmute::<*mut c_void, Accept>(next(c"accept")),
                accept4: std::mem::transmute::<*mut c_void, Accept4>(next(c"accept4")),
                getpeername: std::mem::transmute::<*mut c_void, GetName>(next(c"getpeername")),
                getsockopt: std::mem::transmute::<*mut c_void, GetSockOpt>(next(c"getsockopt")),
                close: std::mem::transmute::<*mut c_void, Close>(next(c"close")),
                bind: std::mem::transmute::<*mut c_void, Bind>(next(c"bind")),
                ioctl: std::mem::transmute::<*mut c_void, Ioctl>(next(c"ioctl")),
                getifaddrs: std::mem::transmute::<*mut c_void, GetIfAddrs>(next(c"getifaddrs")),
            }
        }
    })
}

/// The next definition of `name` after this library; a C library without it is a broken
/// process, and there is nothing to fall back on.
fn next(name: &std::ffi::CStr) -> *mut c_void {
    // SAFETY: a NUL-terminated name; RTLD_NEXT looks it up after this library.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if p.is_null() {
        let msg = b"throttle-preload: the C library has no socket call this library needs\n";
        // SAFETY: writing a valid buffer to stderr, then ending the process.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::abort();
        }
    }
    p
}
