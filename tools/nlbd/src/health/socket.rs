//! The probes' TCP sockets: created with the options a probe wants, ended the cheapest way the
//! backend cannot notice, and kept for the next probe when they can be.
//!
//! A probe is one fresh TCP connection (a stopped listener must fail it), but the *socket*
//! need not be fresh: `connect()` with `AF_UNSPEC` aborts a connection and leaves the socket
//! unconnected, ready to connect again, which spares `socket()` and the `close()` that frees
//! its file and inode (about 5 µs of kernel time per probe on the development VM).

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::Interest;
use tokio::net::{TcpSocket, TcpStream};

/// Unconnected sockets kept for the next probes, per address family.
#[derive(Debug)]
pub(crate) struct SocketPool {
    v4: Mutex<Vec<std::net::TcpStream>>,
    v6: Mutex<Vec<std::net::TcpStream>>,
    capacity: usize,
}

impl SocketPool {
    /// A pool keeping at most `capacity` idle sockets per family (each holds a descriptor).
    pub(crate) fn new(capacity: usize) -> Self {
        SocketPool {
            v4: Mutex::new(Vec::new()),
            v6: Mutex::new(Vec::new()),
            capacity,
        }
    }

    fn family(&self, v4: bool) -> MutexGuard<'_, Vec<std::net::TcpStream>> {
        let m = if v4 { &self.v4 } else { &self.v6 };
        m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// An idle socket of `addr`'s family, if one is kept.
    fn take(&self, addr: SocketAddr) -> Option<std::net::TcpStream> {
        self.family(addr.is_ipv4()).pop()
    }

    /// Keeps an unconnected socket (or closes it when the pool is full).
    fn put(&self, socket: std::net::TcpStream, v4: bool) {
        let mut idle = self.family(v4);
        if idle.len() < self.capacity {
            idle.push(socket);
        }
    }

    /// Idle sockets kept now (both families).
    #[cfg(test)]
    pub(crate) fn idle(&self) -> usize {
        self.family(true).len() + self.family(false).len()
    }
}

/// How a probe connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloseMode {
    /// FIN, unless the backend has already closed its end (then RST, which it cannot see).
    Polite,
    /// Always RST (`CheckerOptions::close_with_reset`).
    Reset,
}

/// Connects a socket for one probe to `addr`: an idle one from `pool` or a new one. With
/// `defer_ack`, a new socket holds the handshake's last ACK back for the data the probe sends
/// at once ([`defer_handshake_ack`]; the pooled sockets all have it).
pub(crate) async fn connect(
    addr: SocketAddr,
    mode: CloseMode,
    pool: Option<&SocketPool>,
    defer_ack: bool,
) -> io::Result<TcpStream> {
    if let Some(idle) = pool.and_then(|p| p.take(addr)) {
        // Its options were set when it was created.
        match TcpSocket::from_std_stream(idle).connect(addr).await {
            // A kept socket unfit to connect again is no news about the backend.
            Err(e) if is_reuse_error(&e) => {}
            result => return result,
        }
    }
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if defer_ack {
        // Only an optimisation (one packet fewer each way); a probe works without it.
        let _ = defer_handshake_ack(&socket);
    }
    if mode == CloseMode::Reset {
        // A zero linger never blocks (tokio's deprecation is about non-zero values blocking
        // the thread on drop).
        #[allow(deprecated)]
        socket.set_linger(Some(Duration::ZERO))?;
    }
    socket.connect(addr).await
}

/// Errors `connect()` gives a socket in the wrong state, not an unreachable backend.
fn is_reuse_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EISCONN | libc::EALREADY | libc::EINVAL | libc::EAFNOSUPPORT)
    )
}

/// The connection of a probe that got its complete response, to be ended.
#[derive(Debug)]
pub(crate) struct Ending {
    stream: TcpStream,
    mode: CloseMode,
    /// The family of the pool it goes back to (that of the address it was connected to).
    v4: bool,
}

impl Ending {
    pub(crate) fn new(stream: TcpStream, mode: CloseMode, peer: SocketAddr) -> Self {
        Ending {
            stream,
            mode,
            v4: peer.is_ipv4(),
        }
    }

    /// Ends the connection, waiting up to `grace` for the backend's FIN.
    ///
    /// When the backend has closed its end (its FIN arrived, as it does right after the
    /// response of a server that honours `Connection: close`), ours ends with a reset: the
    /// backend's application has closed the socket and cannot see it, and both kernels skip
    /// the last ACK (the backend keeps no TIME_WAIT socket either). The socket then goes back
    /// to `pool`. A backend that keeps its end open past `grace`, or sends more than the
    /// response, gets the usual FIN (in [`CloseMode::Polite`]). A FIN that came with the
    /// response is seen in tokio's readiness with no system call; one that comes later costs
    /// one `recv` and one wake-up (see [`backend_fin`]).
    pub(crate) async fn end(self, pool: Option<&SocketPool>, grace: Duration) {
        let Ending { stream, mode, v4 } = self;
        let backend_closed = if grace.is_zero() {
            tokio::select! {
                biased;
                ready = stream.ready(Interest::READABLE) => ready.is_ok_and(|r| r.is_read_closed()),
                () = std::future::ready(()) => false,
            }
        } else {
            tokio::time::timeout(grace, backend_fin(&stream))
                .await
                .unwrap_or(false)
        };
        if mode == CloseMode::Polite && !backend_closed {
            return; // dropped: FIN
        }
        match pool {
            Some(pool) => {
                let Ok(socket) = stream.into_std() else {
                    return;
                };
                if disconnect(&socket).is_ok() {
                    pool.put(socket, v4);
                }
            }
            None if mode == CloseMode::Polite => {
                #[allow(deprecated)]
                let _ = stream.set_linger(Some(Duration::ZERO));
            }
            // Reset mode without a pool: the linger set at creation makes the drop a reset.
            None => {}
        }
    }
}

/// Waits for the backend's FIN after a complete response; false when it sends more bytes
/// instead (or the socket fails).
///
/// The response's own arrival leaves the stream "readable" in the reactor, and reading the
/// response does not clear that (the reader stops at the end of the body without meeting
/// `EAGAIN`). A FIN that arrives a little after the response, as it usually does, therefore
/// has to be waited for: one `recv` finds nothing yet (which clears the stale readiness) and
/// the FIN's own event ends the wait. Without it the probe would close first with a FIN while
/// the backend's is on its way, losing the socket and leaving a TIME_WAIT behind.
async fn backend_fin(stream: &TcpStream) -> bool {
    loop {
        let Ok(ready) = stream.ready(Interest::READABLE).await else {
            return false;
        };
        if ready.is_read_closed() {
            return true;
        }
        match stream.try_read(&mut [0u8; 1]) {
            Ok(0) => return true,
            // Bytes after the response: not a backend that closes.
            Ok(_) => return false,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return false,
        }
    }
}

/// Makes the kernel hold back the last ACK of the TCP handshake so that it rides on the
/// request, which is written as soon as the connection is up: one packet fewer for the prober
/// to send and for the backend to receive. `TCP_DEFER_ACCEPT` on a connecting socket does
/// exactly this on Linux (`tcp_rcv_synsent_state_process`); should the request not follow,
/// the delayed-ACK timer sends the ACK within 200 ms, as plain TCP would have.
fn defer_handshake_ack(socket: &TcpSocket) -> io::Result<()> {
    let seconds: libc::c_int = 1;
    // SAFETY: the descriptor is owned by `socket`, alive for the call; the option value is a
    // c_int on the stack that outlives the call, and its exact size is passed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&seconds as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Aborts the connection (RST) and leaves the socket unconnected and ready to connect again:
/// `connect()` with `AF_UNSPEC` (`tcp_disconnect`), which also releases the local port. Then
/// clears the error the abort leaves on the socket, which the next connection would otherwise
/// report as its own.
fn disconnect(socket: &std::net::TcpStream) -> io::Result<()> {
    // SAFETY: an all-zero sockaddr is a valid value of this plain C struct.
    let mut unspec: libc::sockaddr = unsafe { std::mem::zeroed() };
    unspec.sa_family = libc::AF_UNSPEC as libc::sa_family_t;
    // SAFETY: the descriptor is owned by `socket`, alive for the call; `unspec` is a valid
    // sockaddr of the size passed.
    let rc = unsafe {
        libc::connect(
            socket.as_raw_fd(),
            &unspec,
            std::mem::size_of::<libc::sockaddr>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    socket.take_error()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// One socket (the same descriptor, kept open in the pool in between) serves connection
    /// after connection: each reaches the listener as a new connection from a new local port
    /// and carries data both ways; no error of the previous one leaks into the next.
    #[tokio::test]
    async fn a_disconnected_socket_connects_again() {
        let pool = SocketPool::new(4);
        reuse_three_times(IpAddr::V4(Ipv4Addr::LOCALHOST), &pool).await;
        assert_eq!((pool.family(true).len(), pool.family(false).len()), (1, 0));
        reuse_three_times(IpAddr::V6(Ipv6Addr::LOCALHOST), &pool).await;
        assert_eq!((pool.family(true).len(), pool.family(false).len()), (1, 1));
    }

    async fn reuse_three_times(ip: IpAddr, pool: &SocketPool) {
        let listener = TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let kept = pool.idle();
        let mut ports = Vec::new();
        let mut fds = Vec::new();
        for round in 0..3u8 {
            let mut stream = connect(addr, CloseMode::Polite, Some(pool), true)
                .await
                .unwrap();
            // The handshake's last ACK rides on this first write (the listener queues the
            // connection only then).
            stream.write_all(&[round]).await.unwrap();
            let (mut server, peer) = listener.accept().await.unwrap();
            assert_eq!(stream.local_addr().unwrap(), peer);
            ports.push(peer.port());
            fds.push(stream.as_raw_fd());
            let mut byte = [0u8; 1];
            server.read_exact(&mut byte).await.unwrap();
            assert_eq!(byte[0], round);
            server.write_all(b"x").await.unwrap();
            drop(server); // the backend closes first, as after `Connection: close`
            stream.read_exact(&mut byte).await.unwrap();
            assert_eq!(stream.read(&mut byte).await.unwrap(), 0, "backend's FIN");
            Ending::new(stream, CloseMode::Polite, addr)
                .end(Some(pool), Duration::from_secs(1))
                .await;
            assert_eq!(
                pool.idle(),
                kept + 1,
                "round {round}: the socket went back to the pool"
            );
        }
        ports.dedup();
        assert_eq!(ports.len(), 3, "a new local port each time: {ports:?}");
        assert!(fds.iter().all(|fd| *fd == fds[0]), "one socket: {fds:?}");
    }

    /// A backend whose FIN comes a little after the response (the response already read,
    /// so the stream still looks readable) is waited for: its FIN ends the connection with a
    /// reset and the socket is reused, instead of closing first with a FIN.
    #[tokio::test]
    async fn a_late_fin_is_waited_for() {
        let pool = SocketPool::new(4);
        let (mut stream, mut server, addr) = requested(&pool).await;
        let mut byte = [0u8; 1];
        server.write_all(b"x").await.unwrap();
        stream.read_exact(&mut byte).await.unwrap();
        let backend = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(server);
        });
        Ending::new(stream, CloseMode::Polite, addr)
            .end(Some(&pool), Duration::from_secs(2))
            .await;
        backend.await.unwrap();
        assert_eq!(pool.idle(), 1, "the socket went back to the pool");
    }

    /// A backend that keeps its end open gets a FIN, and the socket is not reused.
    #[tokio::test]
    async fn an_open_backend_gets_a_fin() {
        let pool = SocketPool::new(4);
        let (stream, mut server, addr) = requested(&pool).await;
        let mut byte = [0u8; 1];
        // It does not close within the grace period: we close first, with a FIN.
        Ending::new(stream, CloseMode::Polite, addr)
            .end(Some(&pool), Duration::from_millis(50))
            .await;
        assert_eq!(server.read(&mut byte).await.unwrap(), 0, "FIN, not a reset");
        assert_eq!(pool.idle(), 0);
    }

    /// A polite connection from `pool` to a fresh loopback listener whose one-byte request
    /// the backend side has read: (client stream, backend stream, backend address).
    async fn requested(
        pool: &SocketPool,
    ) -> (
        tokio::net::TcpStream,
        tokio::net::TcpStream,
        std::net::SocketAddr,
    ) {
        let listener = TcpListener::bind((IpAddr::V4(Ipv4Addr::LOCALHOST), 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let mut stream = connect(addr, CloseMode::Polite, Some(pool), true)
            .await
            .unwrap();
        stream.write_all(b"?").await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let mut byte = [0u8; 1];
        server.read_exact(&mut byte).await.unwrap();
        (stream, server, addr)
    }
}
