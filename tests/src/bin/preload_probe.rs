//! A small unmodified TCP program for the preload library's end-to-end tests: it knows
//! nothing of throttle and reports what the C library's socket calls told it.
//!
//! * `serve ADDR`: accept one connection, print `accepted=<accept's address>
//!   getpeername=<...> local=<...>`, echo what arrives, exit.
//! * `connect ADDR [nonblocking]`: connect, print `local=<...> peer=<...>`, send a line,
//!   read it back, print `echo=ok`; a failed connect prints `error=<errno name>`.
//! * `spawn ADDR`: run `connect ADDR` as a child process (fork and exec: the preload must
//!   pass on) and exit with its status.
//! * `ask-nodes ADDR`: ask the agent's preload port at ADDR for its node list directly,
//!   as a client that skips the library's checks would; print `nodes=N` or
//!   `refused=<why>`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};

fn errno_name(e: i32) -> String {
    match e {
        libc::ECONNREFUSED => "ECONNREFUSED".into(),
        libc::ETIMEDOUT => "ETIMEDOUT".into(),
        libc::EHOSTUNREACH => "EHOSTUNREACH".into(),
        libc::EACCES => "EACCES".into(),
        e => format!("errno {e}"),
    }
}

fn peer_of(fd: i32) -> String {
    // SAFETY: an open socket of this process, borrowed (never closed here).
    let s = std::mem::ManuallyDrop::new(unsafe { TcpStream::from_raw_fd(fd) });
    s.peer_addr()
        .map_or_else(|e| e.to_string(), |a| a.to_string())
}

fn serve(addr: SocketAddr) {
    let l = TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
    println!("listening={}", l.local_addr().unwrap());
    let (mut c, from) = l.accept().unwrap();
    println!(
        "accepted={from} getpeername={} local={}",
        peer_of(c.as_raw_fd()),
        c.local_addr().unwrap()
    );
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if c.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
}

fn connect(addr: SocketAddr, nonblocking: bool) -> i32 {
    let s = if nonblocking {
        // SAFETY: plain socket creation.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0) };
        let SocketAddr::V4(a) = addr else {
            panic!("IPv4 only")
        };
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*a.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: a valid sockaddr_in and its size.
        let r = unsafe {
            libc::connect(
                fd,
                &sin as *const libc::sockaddr_in as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if r != 0 && e != libc::EINPROGRESS {
            println!("error={}", errno_name(e));
            return 1;
        }
        println!("connect={}", if r == 0 { "0" } else { "EINPROGRESS" });
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, 20_000) };
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: an int-sized option into an int.
        unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                &mut err as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        };
        if err != 0 {
            println!("error={}", errno_name(err));
            return 1;
        }
        // SAFETY: the socket created above, owned from here on.
        let s = unsafe { TcpStream::from_raw_fd(fd) };
        s.set_nonblocking(false).unwrap();
        s
    } else {
        match TcpStream::connect(addr) {
            Ok(s) => s,
            Err(e) => {
                println!("error={}", errno_name(e.raw_os_error().unwrap_or(0)));
                return 1;
            }
        }
    };
    println!(
        "local={} peer={}",
        s.local_addr().unwrap(),
        peer_of(s.as_raw_fd())
    );
    let mut s = s;
    let line = b"through the agents?\n";
    s.write_all(line).unwrap();
    let mut back = vec![0u8; line.len()];
    s.read_exact(&mut back).unwrap();
    println!("echo={}", if back == line { "ok" } else { "WRONG" });
    0
}

fn ask_nodes(agent: SocketAddr) -> i32 {
    use throttle_proto::preload::{NodeList, Request, ADDR_LEN};
    let asked = (|| -> std::io::Result<usize> {
        let mut s = TcpStream::connect(agent)?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        s.write_all(&Request::Nodes.encode())?;
        let mut head = [0u8; 4];
        s.read_exact(&mut head)?;
        let n = NodeList::entries(&head).map_err(std::io::Error::other)?;
        let mut body = vec![0u8; n * (1 + ADDR_LEN)];
        s.read_exact(&mut body)?;
        Ok(NodeList::decode(n, &body)
            .map_err(std::io::Error::other)?
            .nodes
            .len())
    })();
    match asked {
        Ok(n) => {
            println!("nodes={n}");
            0
        }
        Err(e) => {
            println!("refused={e}");
            1
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = || -> SocketAddr {
        args.get(2)
            .and_then(|a| a.parse().ok())
            .expect("usage: preload_probe serve|connect|spawn ADDR [nonblocking]")
    };
    let code = match args.get(1).map(String::as_str) {
        Some("serve") => {
            serve(addr());
            0
        }
        Some("connect") => connect(addr(), args.get(3).is_some_and(|a| a == "nonblocking")),
        Some("ask-nodes") => ask_nodes(addr()),
        Some("spawn") => std::process::Command::new(std::env::current_exe().unwrap())
            .args(["connect", &args[2]])
            .status()
            .map_or(1, |s| s.code().unwrap_or(1)),
        _ => {
            eprintln!("usage: preload_probe serve|connect|spawn|ask-nodes ADDR [nonblocking]");
            2
        }
    };
    std::process::exit(code);
}
