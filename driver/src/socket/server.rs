//! The server side of the socket protocol: serves any [`Device`] (the simulated NIC in
//! `nlb-sim`, later the RTL) to `SocketDevice` clients, one thread per connection.

use super::*;
use crate::device::Device;
use crate::dma::{DmaRegion, IrqLine};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Ops run per call into the device: a simulated device with traffic running takes its lock
/// per call, so packets interleave with a long batch at this granularity.
const OPS_PER_CALL: usize = 256;
/// How often the accept loop looks at the stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(20);
/// Longest WAIT served (a client cannot park a server thread for longer).
const MAX_WAIT: Duration = Duration::from_secs(10);

/// Makes the device a new connection talks to.
pub type DeviceFactory = dyn Fn() -> Box<dyn Device> + Send + Sync;

/// A listening socket serving a device.
pub struct Server {
    listener: UnixListener,
    path: PathBuf,
    factory: Arc<DeviceFactory>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("path", &self.path).finish()
    }
}

impl Server {
    /// Binds `path`. A stale socket file nobody answers on is replaced; a live one, or any
    /// other kind of file, is an error.
    pub fn bind(path: impl AsRef<Path>, factory: Arc<DeviceFactory>) -> io::Result<Server> {
        let path = path.as_ref().to_path_buf();
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if !meta.file_type().is_socket() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", path.display()),
                ));
            }
            if UnixStream::connect(&path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("another server answers on {}", path.display()),
                ));
            }
            std::fs::remove_file(&path)?;
        }
        let listener = UnixListener::bind(&path)?;
        Ok(Server {
            listener,
            path,
            factory,
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts connections until stopped; each is served on its own thread.
    pub fn run(&self) -> io::Result<()> {
        // Non-blocking accept polled every few milliseconds, so a stop request is seen even
        // when nobody connects (or the socket file was removed).
        self.listener.set_nonblocking(true)?;
        while !self.stop.load(Ordering::Relaxed) {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(ACCEPT_POLL);
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            stream.set_nonblocking(false)?;
            let factory = self.factory.clone();
            std::thread::spawn(move || {
                let mut dev = factory();
                // A client that breaks the protocol or goes away ends its own connection only.
                let _ = serve_connection(stream, dev.as_mut());
            });
        }
        Ok(())
    }

    /// Runs the server on a background thread; stopping it (for tests) is `stop()` on the
    /// returned handle.
    pub fn spawn(self) -> ServerHandle {
        let stop = self.stop.clone();
        let thread = std::thread::spawn(move || {
            let _ = self.run();
        });
        ServerHandle {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A server running on a background thread.
#[derive(Debug)]
pub struct ServerHandle {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerHandle {
    /// Stops accepting and waits for the accept loop to end.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

fn io_err(what: &str, source: io::Error) -> DeviceError {
    DeviceError::Io {
        what: what.into(),
        source,
    }
}

fn send(stream: &mut UnixStream, reply: &mut Vec<u8>) -> Result<(), DeviceError> {
    let len = (reply.len() as u32).to_le_bytes();
    reply.splice(0..0, len);
    stream
        .write_all(reply)
        .map_err(|e| io_err("sending a reply", e))
}

fn error_reply(reply: &mut Vec<u8>, op: u32, e: &DeviceError) {
    reply.clear();
    reply.push(ST_ERR);
    put_u32(reply, op);
    let (offset, class) = match e {
        DeviceError::BadOffset { offset, why } if why.contains("aligned") => {
            (*offset, CLASS_UNALIGNED)
        }
        DeviceError::BadOffset { offset, .. } => (*offset, CLASS_BEYOND),
        _ => (0, CLASS_OTHER),
    };
    put_u32(reply, offset);
    reply.push(class);
    put_string(reply, &e.to_string());
}

/// Serves one connection until the client closes it (Ok) or breaks the protocol (Err, after
/// an error reply where one can still be sent).
pub fn serve_connection<D: Device + ?Sized>(
    stream: UnixStream,
    dev: &mut D,
) -> Result<(), DeviceError> {
    let mut mapped: Vec<DmaRegion> = Vec::new();
    let mut irqs = false;
    let r = serve(stream, dev, &mut mapped, &mut irqs);
    // The client's host memory and interrupt lines end with its connection.
    for region in &mapped {
        let _ = dev.dma_unmap(region);
    }
    if irqs {
        let _ = dev.set_interrupts(&[]);
    }
    r
}

fn serve<D: Device + ?Sized>(
    mut stream: UnixStream,
    dev: &mut D,
    mapped: &mut Vec<DmaRegion>,
    irqs: &mut bool,
) -> Result<(), DeviceError> {
    let mut body = Vec::new();
    let mut reply = Vec::new();
    let mut ops = Vec::new();
    let mut origin = Vec::new();
    let mut reads = Vec::new();
    let mut fds: Vec<OwnedFd> = Vec::new();
    loop {
        let mut hdr = [0u8; 4];
        fds.clear();
        match fds::recv_exact_with_fds(&stream, &mut hdr, &mut fds) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(io_err("reading a request", e)),
        }
        let n = u32::from_le_bytes(hdr) as usize;
        if n > MAX_BODY || n == 0 {
            let e = DeviceError::Protocol(format!("request of {n} bytes"));
            error_reply(&mut reply, 0, &e);
            send(&mut stream, &mut reply)?;
            return Err(e);
        }
        body.resize(n, 0);
        stream
            .read_exact(&mut body)
            .map_err(|e| io_err("reading a request", e))?;
        let mut c = Cursor::new(&body);
        reply.clear();
        let op = c.u8()?;
        match op {
            OP_HELLO => {
                let _client_version = c.u32()?;
                reply.push(ST_OK);
                put_u32(&mut reply, PROTOCOL_VERSION);
                put_string(&mut reply, &dev.describe());
            }
            OP_BATCH => {
                if let Err(e) = decode_batch(&mut c, &mut ops, &mut origin) {
                    error_reply(&mut reply, 0, &e);
                    send(&mut stream, &mut reply)?;
                    return Err(e);
                }
                reads.clear();
                let mut failed = None;
                for (k, chunk) in ops.chunks(OPS_PER_CALL).enumerate() {
                    if let Err(e) = dev.run_batch(chunk, &mut reads) {
                        let first = origin.get(k * OPS_PER_CALL).copied().unwrap_or(0);
                        failed = Some((first, e));
                        break;
                    }
                }
                match failed {
                    None => {
                        reply.push(ST_OK);
                        put_u32(&mut reply, reads.len() as u32);
                        reply.reserve(reads.len() * 4);
                        for v in &reads {
                            put_u32(&mut reply, *v);
                        }
                    }
                    Some((op, e)) => error_reply(&mut reply, op, &e),
                }
            }
            OP_WAIT => {
                let nanos = c.u64()?;
                let d = Duration::from_nanos(nanos).min(MAX_WAIT);
                match dev.wait(d) {
                    Ok(()) => reply.push(ST_OK),
                    Err(e) => error_reply(&mut reply, 0, &e),
                }
            }
            OP_MAP_DMA => {
                let (iova, len, page) = (c.u64()?, c.u64()?, c.u32()?);
                let outcome = match fds.pop() {
                    None => Err(DeviceError::Protocol("MAP_DMA without a memfd".into())),
                    Some(fd) => usize::try_from(len)
                        .map_err(|_| DeviceError::Protocol(format!("region of {len} bytes")))
                        .and_then(|len| {
                            DmaRegion::from_fd(fd, len, iova, page as usize).map_err(|e| {
                                DeviceError::Protocol(format!("cannot map the region: {e}"))
                            })
                        })
                        .and_then(|region| {
                            dev.dma_map(&region)?;
                            mapped.retain(|r| r.iova() != iova);
                            mapped.push(region);
                            Ok(())
                        }),
                };
                match outcome {
                    Ok(()) => reply.push(ST_OK),
                    Err(e) => error_reply(&mut reply, 0, &e),
                }
            }
            OP_UNMAP_DMA => {
                let (iova, _len) = (c.u64()?, c.u64()?);
                let mut result = Ok(());
                if let Some(k) = mapped.iter().position(|r| r.iova() == iova) {
                    let region = mapped.remove(k);
                    result = dev.dma_unmap(&region);
                }
                match result {
                    Ok(()) => reply.push(ST_OK),
                    Err(e) => error_reply(&mut reply, 0, &e),
                }
            }
            OP_IRQS => {
                let n = c.u32()? as usize;
                if n != fds.len() {
                    let e = DeviceError::Protocol(format!(
                        "IRQS names {n} lines, {} eventfds came",
                        fds.len()
                    ));
                    error_reply(&mut reply, 0, &e);
                } else {
                    let lines: Vec<IrqLine> = fds.drain(..).map(IrqLine::from_fd).collect();
                    match dev.set_interrupts(&lines) {
                        Ok(()) => {
                            *irqs = !lines.is_empty();
                            reply.push(ST_OK)
                        }
                        Err(e) => error_reply(&mut reply, 0, &e),
                    }
                }
            }
            OP_PCIE => {
                reply.push(ST_OK);
                encode_pcie(&dev.pcie(), &mut reply);
            }
            other => {
                let e = DeviceError::Protocol(format!("unknown opcode {other}"));
                error_reply(&mut reply, 0, &e);
                send(&mut stream, &mut reply)?;
                return Err(e);
            }
        }
        send(&mut stream, &mut reply)?;
    }
}
