//! The `SocketDevice` backend: a device served by another process over a Unix socket.

use super::*;
use crate::device::Device;
use crate::dma::{DmaRegion, IrqLine};
use crate::pcie::{PcieCosts, PcieLedger, PcieStats};
use std::io::{self, Read, Write};
use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a reply may take before the device counts as gone.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// A device behind a Unix socket (`nlb-sim --socket PATH`).
#[derive(Debug)]
pub struct SocketDevice {
    stream: UnixStream,
    path: PathBuf,
    remote: String,
    body: Vec<u8>,
    reply: Vec<u8>,
    /// Register accesses this client made, on the cost model.
    ledger: PcieLedger,
}

impl SocketDevice {
    /// Connects and checks the protocol version.
    pub fn connect(path: impl AsRef<Path>) -> Result<SocketDevice, DeviceError> {
        let path = path.as_ref().to_path_buf();
        let stream = UnixStream::connect(&path).map_err(|source| DeviceError::Io {
            what: format!(
                "cannot connect to the simulated NIC at {} (is `nlb-sim --socket {}` running?)",
                path.display(),
                path.display()
            ),
            source,
        })?;
        stream
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .map_err(|source| DeviceError::Io {
                what: "setting the socket timeout".into(),
                source,
            })?;
        let mut s = SocketDevice {
            stream,
            path,
            remote: String::new(),
            body: Vec::new(),
            reply: Vec::new(),
            ledger: PcieLedger::new(PcieCosts::default()),
        };
        s.body.clear();
        s.body.push(OP_HELLO);
        put_u32(&mut s.body, PROTOCOL_VERSION);
        s.roundtrip()?;
        let mut c = Cursor::new(&s.reply);
        if c.u8()? != ST_OK {
            return Err(DeviceError::Protocol("the server refused HELLO".into()));
        }
        let version = c.u32()?;
        if version != PROTOCOL_VERSION {
            return Err(DeviceError::Protocol(format!(
                "the server speaks socket protocol version {version}, this driver {PROTOCOL_VERSION}"
            )));
        }
        s.remote = c.string()?;
        Ok(s)
    }

    /// The device description the server gave.
    pub fn remote(&self) -> &str {
        &self.remote
    }

    fn io(&self, what: &str, source: io::Error) -> DeviceError {
        if matches!(
            source.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            return DeviceError::Timeout {
                what: format!("a reply from {}", self.path.display()),
                after: REPLY_TIMEOUT,
            };
        }
        DeviceError::Io {
            what: format!("{what} {}", self.path.display()),
            source,
        }
    }

    /// Sends `self.body`, reads one reply into `self.reply`.
    fn roundtrip(&mut self) -> Result<(), DeviceError> {
        self.roundtrip_with(&[])
    }

    /// Sends `self.body` with descriptors attached, reads one reply into `self.reply`.
    fn roundtrip_with(&mut self, fds: &[BorrowedFd<'_>]) -> Result<(), DeviceError> {
        let len = (self.body.len() as u32).to_le_bytes();
        // One write for header and body keeps small messages in one segment.
        self.body.splice(0..0, len);
        let sent = if fds.is_empty() {
            self.stream.write_all(&self.body)
        } else {
            fds::send_with_fds(&self.stream, &self.body, fds)
        };
        self.body.drain(0..4);
        sent.map_err(|e| self.io("sending to", e))?;
        let mut hdr = [0u8; 4];
        self.stream
            .read_exact(&mut hdr)
            .map_err(|e| self.io("reading from", e))?;
        let n = u32::from_le_bytes(hdr) as usize;
        if n > MAX_BODY {
            return Err(DeviceError::Protocol(format!(
                "reply of {n} bytes exceeds the limit"
            )));
        }
        self.reply.resize(n, 0);
        let mut reply = std::mem::take(&mut self.reply);
        let got = self.stream.read_exact(&mut reply);
        self.reply = reply;
        got.map_err(|e| self.io("reading from", e))
    }

    /// Sends a request of `self.body` and expects a bare `0` reply.
    fn simple(&mut self, fds: &[BorrowedFd<'_>], what: &str) -> Result<(), DeviceError> {
        self.roundtrip_with(fds)?;
        let mut c = Cursor::new(&self.reply);
        match c.u8()? {
            ST_OK => Ok(()),
            _ => {
                let _op = c.u32()?;
                let _offset = c.u32()?;
                let _class = c.u8()?;
                let message = c.string()?;
                Err(DeviceError::Protocol(format!("{what}: {message}")))
            }
        }
    }

    fn run_chunk(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        let n_reads = ops.iter().filter(|o| matches!(o, RegOp::Read(_))).count() as u64;
        self.ledger.mmio_reads(n_reads);
        self.ledger.mmio_writes(ops.len() as u64 - n_reads);
        let mut body = std::mem::take(&mut self.body);
        let expected = encode_batch(ops, &mut body);
        self.body = body;
        self.roundtrip()?;
        let mut c = Cursor::new(&self.reply);
        match c.u8()? {
            ST_OK => {
                let n = c.u32()? as usize;
                if n != expected {
                    return Err(DeviceError::Protocol(format!(
                        "{n} values in the reply, {expected} reads were sent"
                    )));
                }
                reads.reserve(n);
                for _ in 0..n {
                    reads.push(c.u32()?);
                }
                Ok(())
            }
            ST_ERR => {
                let _op = c.u32()?;
                let offset = c.u32()?;
                let class = c.u8()?;
                let message = c.string()?;
                Err(match class {
                    CLASS_UNALIGNED => DeviceError::BadOffset {
                        offset,
                        why: "not 4-byte aligned",
                    },
                    CLASS_BEYOND => DeviceError::BadOffset {
                        offset,
                        why: "beyond BAR 0",
                    },
                    _ => DeviceError::Protocol(format!("the server's device failed: {message}")),
                })
            }
            other => Err(DeviceError::Protocol(format!(
                "unknown reply status {other}"
            ))),
        }
    }
}

impl Device for SocketDevice {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        let mut r = Vec::with_capacity(1);
        self.run_chunk(&[RegOp::Read(offset)], &mut r)?;
        r.first()
            .copied()
            .ok_or_else(|| DeviceError::Protocol("no value in the reply".into()))
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.run_chunk(&[RegOp::Write(offset, value)], &mut Vec::new())
    }

    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        // Keep each message (and its reply) under the body limit.
        let per_message = (MAX_BODY - 16) / MAX_OP_BYTES;
        for chunk in ops.chunks(per_message) {
            self.run_chunk(chunk, reads)?;
        }
        Ok(())
    }

    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        self.body.clear();
        self.body.push(OP_WAIT);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        put_u32(&mut self.body, nanos as u32);
        put_u32(&mut self.body, (nanos >> 32) as u32);
        self.roundtrip()?;
        match self.reply.first() {
            Some(&ST_OK) => Ok(()),
            _ => Err(DeviceError::Protocol("WAIT refused".into())),
        }
    }

    fn describe(&self) -> String {
        format!("sim:{}", self.path.display())
    }

    fn dma_map(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        self.body.clear();
        self.body.push(OP_MAP_DMA);
        put_u64(&mut self.body, region.iova());
        put_u64(&mut self.body, region.len() as u64);
        put_u32(&mut self.body, region.page_size() as u32);
        self.simple(&[region.fd()], "mapping host memory for the simulated NIC")
    }

    fn dma_unmap(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        self.body.clear();
        self.body.push(OP_UNMAP_DMA);
        put_u64(&mut self.body, region.iova());
        put_u64(&mut self.body, region.len() as u64);
        self.simple(&[], "unmapping host memory")
    }

    fn set_interrupts(&mut self, lines: &[IrqLine]) -> Result<(), DeviceError> {
        self.body.clear();
        self.body.push(OP_IRQS);
        put_u32(&mut self.body, lines.len() as u32);
        let fds: Vec<BorrowedFd<'_>> = lines.iter().map(|l| l.fd()).collect();
        if fds.is_empty() {
            return self.simple(&[], "interrupt lines");
        }
        self.simple(&fds, "interrupt lines")
    }

    /// Register accesses counted here; the DMA the server's device did into this client's
    /// memory, as the server counted it.
    fn mmio_seen(&self) -> (u64, u64) {
        let s = self.ledger.stats();
        (s.mmio_reads, s.mmio_writes)
    }

    fn pcie(&mut self) -> PcieStats {
        let mut s = self.ledger.stats();
        self.body.clear();
        self.body.push(OP_PCIE);
        if self.roundtrip().is_ok() {
            let mut c = Cursor::new(&self.reply);
            if let (Ok(ST_OK), Ok(remote)) = (c.u8(), decode_pcie(&mut c)) {
                s.dma_reads = remote.dma_reads;
                s.dma_read_bytes = remote.dma_read_bytes;
                s.dma_writes = remote.dma_writes;
                s.dma_write_bytes = remote.dma_write_bytes;
                s.interrupts = remote.interrupts;
                s.iotlb_misses = remote.iotlb_misses;
                s.faults = remote.faults;
                s.device_cpu_ns = remote.device_cpu_ns;
                s.dma_read_ns = remote.dma_read_ns;
                s.dma_read_latency_ns = remote.dma_read_latency_ns;
                s.dma_write_ns = remote.dma_write_ns;
                s.interrupt_ns = remote.interrupt_ns;
            }
        }
        s
    }
}
