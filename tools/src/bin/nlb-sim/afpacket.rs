//! Raw Ethernet frames on Linux interfaces through AF_PACKET sockets.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A receive socket on one interface and a transmit socket on another (or the same).
#[derive(Debug)]
pub struct Port {
    rx: OwnedFd,
    tx: OwnedFd,
}

fn ifindex(name: &str) -> io::Result<i32> {
    let c = CString::new(name).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name `{name}`"),
        )
    })?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no network interface `{name}` (`ip link` lists them)"),
        ));
    }
    Ok(index as i32)
}

fn check(ret: libc::c_int, what: &str) -> io::Result<libc::c_int> {
    if ret < 0 {
        let e = io::Error::last_os_error();
        let hint = if e.kind() == io::ErrorKind::PermissionDenied {
            " (raw sockets need root or CAP_NET_RAW)"
        } else {
            ""
        };
        return Err(io::Error::new(e.kind(), format!("{what}: {e}{hint}")));
    }
    Ok(ret)
}

/// An AF_PACKET socket bound to one interface, seeing every frame on it.
fn bound_socket(name: &str, promiscuous: bool) -> io::Result<OwnedFd> {
    let index = ifindex(name)?;
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = check(
        unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                i32::from(proto),
            )
        },
        &format!("AF_PACKET socket for {name}"),
    )?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid starting value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = proto;
    addr.sll_ifindex = index;
    // SAFETY: `addr` is a properly initialised sockaddr_ll and the length passed is its size.
    let ret = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    check(ret, &format!("binding to {name}"))?;
    // Frames we transmit on this interface must not come back as input.
    let one: libc::c_int = 1;
    // SAFETY: the option value points at a live c_int of the size given.
    let _ = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    // A deep receive buffer: bursts arrive faster than the model runs.
    let rcvbuf: libc::c_int = 8 << 20;
    // SAFETY: the option value points at a live c_int of the size given.
    let _ = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&rcvbuf as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if promiscuous {
        // SAFETY: packet_mreq is plain old data; all-zero is valid.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = index;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        // SAFETY: `mreq` is initialised and the length is its size.
        let ret = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                (&mreq as *const libc::packet_mreq).cast(),
                std::mem::size_of::<libc::packet_mreq>() as libc::socklen_t,
            )
        };
        check(ret, &format!("promiscuous mode on {name}"))?;
    }
    Ok(fd)
}

impl Port {
    /// Opens the receive side on `rx` (promiscuous: frames are addressed to the NIC's MAC,
    /// not the interface's) and the transmit side on `tx`.
    pub fn open(rx: &str, tx: &str) -> io::Result<Port> {
        Ok(Port {
            rx: bound_socket(rx, true)?,
            tx: bound_socket(tx, false)?,
        })
    }

    /// Receives one frame into `buf`; returns its length (frames longer than `buf` are cut).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the whole call.
            let n =
                unsafe { libc::recv(self.rx.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Transmits one frame.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is valid for reads of `frame.len()` bytes for the whole call.
        let n = unsafe { libc::send(self.tx.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        check(n as libc::c_int, "transmitting").map(|_| ())
    }
}
