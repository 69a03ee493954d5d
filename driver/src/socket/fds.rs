//! File descriptors over the Unix socket (`SCM_RIGHTS`): the memfd of a DMA region and the
//! eventfds of the interrupt lines go from the driver to the process serving the device.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// Most descriptors one message carries.
pub const MAX_FDS: usize = 8;

/// Room for the control message of [`MAX_FDS`] descriptors.
const CMSG_ROOM: usize = 256;

/// Sends all of `data`, the descriptors attached to its first byte.
pub fn send_with_fds(stream: &UnixStream, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.is_empty() || fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} descriptors (1..={MAX_FDS})", fds.len()),
        ));
    }
    let raw: Vec<libc::c_int> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let payload = std::mem::size_of_val(raw.as_slice());
    let mut cmsg = [0u8; CMSG_ROOM];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: an all-zero msghdr is a valid empty message; the fields set below point at
    // live buffers (`iov`, `cmsg`) for the duration of the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(payload as u32) } as usize;
    if msg.msg_controllen > CMSG_ROOM {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many descriptors",
        ));
    }
    // SAFETY: `msg` has a control buffer of msg_controllen bytes, room for one header with
    // `payload` bytes of data (checked above); CMSG_FIRSTHDR/CMSG_DATA point inside it.
    unsafe {
        let hdr = libc::CMSG_FIRSTHDR(&msg);
        (*hdr).cmsg_level = libc::SOL_SOCKET;
        (*hdr).cmsg_type = libc::SCM_RIGHTS;
        (*hdr).cmsg_len = libc::CMSG_LEN(payload as u32) as usize;
        std::ptr::copy_nonoverlapping(raw.as_ptr().cast::<u8>(), libc::CMSG_DATA(hdr), payload);
    }
    // SAFETY: `msg` describes live buffers; the descriptors stay open for the call.
    let n = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // The descriptors went with the first byte; the rest is plain data.
    let sent = n as usize;
    if sent < data.len() {
        use std::io::Write;
        let mut s = stream;
        s.write_all(&data[sent..])?;
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes, collecting any descriptors that arrive with them.
pub fn recv_exact_with_fds(
    stream: &UnixStream,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
) -> io::Result<()> {
    let mut at = 0;
    while at < buf.len() {
        let mut cmsg = [0u8; CMSG_ROOM];
        let mut iov = libc::iovec {
            iov_base: buf[at..].as_mut_ptr().cast(),
            iov_len: buf.len() - at,
        };
        // SAFETY: as in `send_with_fds`; the buffers outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = CMSG_ROOM;
        // SAFETY: `msg` describes live, writable buffers.
        let n = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // SAFETY: the kernel filled `msg`'s control buffer; walking it with the CMSG macros
        // stays inside msg_controllen, and each SCM_RIGHTS payload is an array of fresh
        // descriptors that now belong to us.
        unsafe {
            let mut hdr = libc::CMSG_FIRSTHDR(&msg);
            while !hdr.is_null() {
                if (*hdr).cmsg_level == libc::SOL_SOCKET && (*hdr).cmsg_type == libc::SCM_RIGHTS {
                    let len = (*hdr).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    let count = len / std::mem::size_of::<libc::c_int>();
                    let data = libc::CMSG_DATA(hdr).cast::<libc::c_int>();
                    for k in 0..count {
                        let fd = std::ptr::read_unaligned(data.add(k));
                        fds.push(OwnedFd::from_raw_fd(fd));
                    }
                }
                hdr = libc::CMSG_NXTHDR(&msg, hdr);
            }
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        at += n as usize;
    }
    Ok(())
}
