//! Raw Ethernet frames on Linux interfaces through AF_PACKET sockets.
//!
//! The receive side asks for `PACKET_AUXDATA`, so each frame comes with the kernel's status:
//! `TP_STATUS_CSUMNOTREADY` marks a frame whose TCP/UDP checksum the local stack left to the
//! "hardware" (CHECKSUM_PARTIAL, what a veth or `lo` delivers from a local sender), which the
//! caller must complete before sending the frame on (see `csum.rs`).

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
fn bound_socket(name: &str, promiscuous: bool, auxdata: bool) -> io::Result<OwnedFd> {
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
    if auxdata {
        // The kernel's per-frame status (checksum not ready) in a control message.
        // SAFETY: the option value points at a live c_int of the size given.
        let ret = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_AUXDATA,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        check(ret, &format!("PACKET_AUXDATA on {name}"))?;
    }
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
            rx: bound_socket(rx, true, true)?,
            tx: bound_socket(tx, false, false)?,
        })
    }

    /// Receives one frame into `buf`, waiting for it.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Received> {
        loop {
            match self.recv_flags(buf, 0)? {
                Some(r) => return Ok(r),
                // Only MSG_DONTWAIT gives no frame.
                None => continue,
            }
        }
    }

    /// Receives one frame into `buf` if one is waiting.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<Option<Received>> {
        self.recv_flags(buf, libc::MSG_DONTWAIT)
    }

    fn recv_flags(&self, buf: &mut [u8], flags: libc::c_int) -> io::Result<Option<Received>> {
        // Room for the auxdata control message, aligned for cmsghdr.
        let mut control = [0u64; 16];
        loop {
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            // SAFETY: msghdr is plain old data; all-zero is a valid starting value.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            // SAFETY: `msg` points at `iov` (valid for writes of `buf.len()` bytes) and at
            // `control` (valid for writes of its size), all live for the whole call.
            // MSG_TRUNC: the return value is the frame's real length, also when it was cut.
            let n =
                unsafe { libc::recvmsg(self.rx.as_raw_fd(), &mut msg, flags | libc::MSG_TRUNC) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => return Ok(None),
                    _ => return Err(e),
                }
            }
            let wire_len = n as usize;
            return Ok(Some(Received {
                len: wire_len.min(buf.len()),
                wire_len,
                csum_not_ready: status(&msg) & libc::TP_STATUS_CSUMNOTREADY != 0,
            }));
        }
    }

    /// Transmits one frame.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is valid for reads of `frame.len()` bytes for the whole call.
        let n = unsafe { libc::send(self.tx.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        check(n as libc::c_int, "transmitting").map(|_| ())
    }
}

/// One received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes written to the buffer.
    pub len: usize,
    /// The frame's length on the interface (more than `len` when the buffer was too small:
    /// a GSO super-frame, or a frame beyond the largest the NIC takes).
    pub wire_len: usize,
    /// The TCP/UDP checksum is only the pseudo-header's (CHECKSUM_PARTIAL).
    pub csum_not_ready: bool,
}

/// `tp_status` of the PACKET_AUXDATA control message of a received message (0 if absent).
fn status(msg: &libc::msghdr) -> u32 {
    // SAFETY: `msg` was filled by recvmsg(2); CMSG_FIRSTHDR/CMSG_NXTHDR only walk inside
    // `msg_control[..msg_controllen]` and return null at its end.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !c.is_null() {
        // SAFETY: `c` is non-null and points at a complete cmsghdr inside the control buffer.
        let h = unsafe { &*c };
        let data_len = (h.cmsg_len as usize).saturating_sub(
            // SAFETY: CMSG_LEN is a pure computation.
            unsafe { libc::CMSG_LEN(0) } as usize,
        );
        if h.cmsg_level == libc::SOL_PACKET
            && h.cmsg_type == libc::PACKET_AUXDATA
            && data_len >= std::mem::size_of::<libc::tpacket_auxdata>()
        {
            // SAFETY: the kernel wrote a tpacket_auxdata as this message's data (its size is
            // checked above); read_unaligned because the data need not be aligned for it.
            let aux: libc::tpacket_auxdata =
                unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast()) };
            return aux.tp_status;
        }
        // SAFETY: as for CMSG_FIRSTHDR; `c` is a header of this message.
        c = unsafe { libc::CMSG_NXTHDR(msg, c) };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csum::complete_l4_checksum;
    use etherparse::{SlicedPacket, TransportSlice};
    use std::net::UdpSocket;
    use std::time::{Duration, Instant};

    /// Raw sockets need root (CAP_NET_RAW): [`nlb_testkit::needs`].
    fn may_run() -> bool {
        nlb_testkit::needs("the AF_PACKET tests", &[nlb_testkit::Need::Root])
    }

    /// The UDP checksum etherparse computes for an IPv4 frame, and the one in the frame.
    fn udp_checksums(frame: &[u8]) -> (u16, u16) {
        let p = SlicedPacket::from_ethernet(frame).expect("etherparse parses it");
        let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
            panic!("not IPv4");
        };
        let Some(TransportSlice::Udp(u)) = &p.transport else {
            panic!("not UDP");
        };
        let want = u
            .to_header()
            .calc_checksum_ipv4_raw(ip.header().source(), ip.header().destination(), u.payload())
            .expect("checksum");
        (want, u.checksum())
    }

    /// The kernel hands frames that a local sender put on `lo` over with CHECKSUM_PARTIAL (as
    /// a veth does): the port reports it, and the completed checksum is the one etherparse
    /// computes.
    #[test]
    fn partial_checksums_from_the_local_stack_are_reported_and_completed() {
        if !may_run() {
            return;
        }
        let port = Port::open("lo", "lo").expect("AF_PACKET on lo");
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let marker = format!(
            "nlb-sim checksum test {} {:?}",
            std::process::id(),
            Instant::now()
        );
        tx.send_to(marker.as_bytes(), rx.local_addr().expect("addr"))
            .expect("send");
        let mut buf = vec![0u8; 65536];
        let deadline = Instant::now() + Duration::from_secs(10);
        let (r, mut frame) = loop {
            assert!(Instant::now() < deadline, "our datagram never showed on lo");
            match port.try_recv(&mut buf).expect("receive") {
                Some(r)
                    if buf[..r.len]
                        .windows(marker.len())
                        .any(|w| w == marker.as_bytes()) =>
                {
                    break (r, buf[..r.len].to_vec());
                }
                Some(_) => {}
                None => std::thread::sleep(Duration::from_millis(2)),
            }
        };
        assert_eq!(r.len, r.wire_len);
        assert!(r.csum_not_ready, "lo delivered a finished checksum: {r:?}");
        let (want, before) = udp_checksums(&frame);
        assert_ne!(before, want, "the field held only the pseudo-header sum");
        assert_eq!(complete_l4_checksum(&mut frame), Ok(want));
        assert_eq!(udp_checksums(&frame), (want, want));
    }
}
