//! The socket device protocol: register access to a device served by another process
//! (`nlb-sim`) over a Unix stream socket.
//!
//! Every message is a little-endian `u32` body length followed by the body; the body's first
//! byte is the opcode. One request gets exactly one reply, in order.
//!
//! | request | body after the opcode | reply body |
//! |---|---|---|
//! | `HELLO` (1) | `u32` protocol version | `0`, `u32` version, `u16` n, n bytes: the device's description |
//! | `BATCH` (2) | `u32` op count, then the ops | `0`, `u32` n, n × `u32` read values; or an error |
//! | `WAIT` (3) | `u64` nanoseconds | `0`; or an error |
//! | `MAP_DMA` (4) | `u64` IOVA, `u64` bytes, `u32` page size; the region's memfd attached (`SCM_RIGHTS`) | `0`; or an error |
//! | `UNMAP_DMA` (5) | `u64` IOVA, `u64` bytes | `0`; or an error |
//! | `IRQS` (6) | `u32` n; n eventfds attached, MSI-X vector i signals the i-th | `0`; or an error |
//! | `PCIE` (7) | | `0`, 10 × `u64` counts, 5 × `f64` nanoseconds (see [`encode_pcie`]) |
//!
//! Batch ops, each a kind byte and its fields: `READ` (0) `u32` offset; `WRITE` (1) `u32`
//! offset, `u32` value; `WRITE_BULK` (2) `u32` offset, `u32` n, n × `u32` values for
//! consecutive registers; `READ_BULK` (3) `u32` offset, `u32` n. The server runs the ops in
//! order and stops at the first that fails; the error reply is `1`, `u32` index of the failed
//! op, `u32` offset, `u8` class (1 unaligned, 2 beyond BAR 0, 3 other), `u16` n, n bytes of
//! message. Bodies are limited to [`MAX_BODY`] bytes; the client splits larger batches and
//! folds runs of consecutive registers into the bulk ops.
//!
//! `MAP_DMA` gives the device the driver's host memory (SPEC R12.2): the server maps the memfd
//! and its device DMAs into it as the card would through the IOMMU; mappings and interrupt
//! lines end with the connection.

mod client;
mod fds;
mod server;

pub use client::SocketDevice;
pub use server::{serve_connection, DeviceFactory, Server, ServerHandle};

use crate::device::{DeviceError, RegOp};

/// Protocol version spoken by this build.
pub const PROTOCOL_VERSION: u32 = 2;
/// Largest message body either side accepts.
pub const MAX_BODY: usize = 16 << 20;

const OP_HELLO: u8 = 1;
const OP_BATCH: u8 = 2;
const OP_WAIT: u8 = 3;
const OP_MAP_DMA: u8 = 4;
const OP_UNMAP_DMA: u8 = 5;
const OP_IRQS: u8 = 6;
const OP_PCIE: u8 = 7;

const K_READ: u8 = 0;
const K_WRITE: u8 = 1;
const K_WRITE_BULK: u8 = 2;
const K_READ_BULK: u8 = 3;

const ST_OK: u8 = 0;
const ST_ERR: u8 = 1;

const CLASS_UNALIGNED: u8 = 1;
const CLASS_BEYOND: u8 = 2;
const CLASS_OTHER: u8 = 3;

/// A little-endian reader over a message body that never panics.
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, at: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DeviceError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.buf.len());
        let Some(end) = end else {
            return Err(DeviceError::Protocol(format!(
                "message ends at byte {} but {} more were expected",
                self.buf.len(),
                n
            )));
        };
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, DeviceError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, DeviceError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, DeviceError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, DeviceError> {
        let lo = self.u32()?;
        let hi = self.u32()?;
        Ok(u64::from(lo) | (u64::from(hi) << 32))
    }

    fn string(&mut self) -> Result<String, DeviceError> {
        let n = self.u16()? as usize;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A `PCIE` reply's payload: the counts, then the times as `f64` bits.
pub fn encode_pcie(s: &crate::pcie::PcieStats, out: &mut Vec<u8>) {
    for v in [
        s.mmio_reads,
        s.mmio_writes,
        s.dma_reads,
        s.dma_read_bytes,
        s.dma_writes,
        s.dma_write_bytes,
        s.interrupts,
        s.iotlb_misses,
        s.faults,
        s.device_cpu_ns,
    ] {
        put_u64(out, v);
    }
    for v in [
        s.mmio_stall_ns,
        s.dma_read_ns,
        s.dma_read_latency_ns,
        s.dma_write_ns,
        s.interrupt_ns,
    ] {
        put_u64(out, v.to_bits());
    }
}

fn decode_pcie(c: &mut Cursor<'_>) -> Result<crate::pcie::PcieStats, DeviceError> {
    let mut n = [0u64; 10];
    for v in &mut n {
        *v = c.u64()?;
    }
    let mut t = [0f64; 5];
    for v in &mut t {
        *v = f64::from_bits(c.u64()?);
    }
    Ok(crate::pcie::PcieStats {
        mmio_reads: n[0],
        mmio_writes: n[1],
        dma_reads: n[2],
        dma_read_bytes: n[3],
        dma_writes: n[4],
        dma_write_bytes: n[5],
        interrupts: n[6],
        iotlb_misses: n[7],
        faults: n[8],
        device_cpu_ns: n[9],
        mmio_stall_ns: t[0],
        dma_read_ns: t[1],
        dma_read_latency_ns: t[2],
        dma_write_ns: t[3],
        interrupt_ns: t[4],
    })
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    out.extend_from_slice(&(b.len() as u16).to_le_bytes());
    out.extend_from_slice(b);
}

/// Encodes ops into a BATCH body, folding runs of consecutive registers into bulk ops.
/// Returns the number of values the reply will carry.
fn encode_batch(ops: &[RegOp], out: &mut Vec<u8>) -> usize {
    out.clear();
    out.push(OP_BATCH);
    let count_at = out.len();
    put_u32(out, 0);
    let mut count = 0u32;
    let mut reads = 0;
    let mut i = 0;
    while i < ops.len() {
        match ops[i] {
            RegOp::Write(offset, _) => {
                let mut n = 1;
                while let Some(RegOp::Write(o, _)) = ops.get(i + n) {
                    if *o != offset.wrapping_add(4 * n as u32) {
                        break;
                    }
                    n += 1;
                }
                if n == 1 {
                    out.push(K_WRITE);
                    put_u32(out, offset);
                } else {
                    out.push(K_WRITE_BULK);
                    put_u32(out, offset);
                    put_u32(out, n as u32);
                }
                for op in &ops[i..i + n] {
                    if let RegOp::Write(_, v) = op {
                        put_u32(out, *v);
                    }
                }
                i += n;
            }
            RegOp::Read(offset) => {
                let mut n = 1;
                while let Some(RegOp::Read(o)) = ops.get(i + n) {
                    if *o != offset.wrapping_add(4 * n as u32) {
                        break;
                    }
                    n += 1;
                }
                if n == 1 {
                    out.push(K_READ);
                    put_u32(out, offset);
                } else {
                    out.push(K_READ_BULK);
                    put_u32(out, offset);
                    put_u32(out, n as u32);
                }
                reads += n;
                i += n;
            }
        }
        count += 1;
    }
    out[count_at..count_at + 4].copy_from_slice(&count.to_le_bytes());
    reads
}

/// Encoded size bound of one op (a lone write), for splitting batches under [`MAX_BODY`].
const MAX_OP_BYTES: usize = 9;

/// Decodes a BATCH body (after the opcode) into ops, expanding bulk ops. Returns, for every
/// decoded op, the index of the wire op it came from (for error replies).
fn decode_batch(
    body: &mut Cursor<'_>,
    ops: &mut Vec<RegOp>,
    origin: &mut Vec<u32>,
) -> Result<(), DeviceError> {
    ops.clear();
    origin.clear();
    let count = body.u32()?;
    for wire in 0..count {
        match body.u8()? {
            K_READ => {
                ops.push(RegOp::Read(body.u32()?));
                origin.push(wire);
            }
            K_WRITE => {
                let offset = body.u32()?;
                ops.push(RegOp::Write(offset, body.u32()?));
                origin.push(wire);
            }
            K_WRITE_BULK => {
                let offset = body.u32()?;
                let n = body.u32()? as usize;
                if n > body.remaining() / 4 {
                    return Err(DeviceError::Protocol(format!(
                        "WRITE_BULK of {n} words in a message with {} bytes left",
                        body.remaining()
                    )));
                }
                for k in 0..n {
                    ops.push(RegOp::Write(offset.wrapping_add(4 * k as u32), body.u32()?));
                    origin.push(wire);
                }
            }
            K_READ_BULK => {
                let offset = body.u32()?;
                let n = body.u32()? as usize;
                // A read costs 4 reply bytes: bound it like a message.
                if n > MAX_BODY / 4 || ops.len() + n > MAX_BODY / 4 {
                    return Err(DeviceError::Protocol(format!(
                        "READ_BULK of {n} words exceeds the reply limit"
                    )));
                }
                for k in 0..n {
                    ops.push(RegOp::Read(offset.wrapping_add(4 * k as u32)));
                    origin.push(wire);
                }
            }
            other => {
                return Err(DeviceError::Protocol(format!(
                    "unknown batch op kind {other}"
                )))
            }
        }
    }
    if body.remaining() != 0 {
        return Err(DeviceError::Protocol(format!(
            "{} stray bytes after the batch",
            body.remaining()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_consecutive_registers_fold_into_bulk_ops() {
        let ops = [
            RegOp::Write(0x2100, 1),
            RegOp::Write(0x2104, 2),
            RegOp::Write(0x2108, 3),
            RegOp::Write(0x2014, 1),
            RegOp::Read(0x2018),
            RegOp::Read(0x2100),
            RegOp::Read(0x2104),
        ];
        let mut body = Vec::new();
        assert_eq!(encode_batch(&ops, &mut body), 3);
        // Hand-encoded: 4 wire ops.
        let mut expected = vec![OP_BATCH, 4, 0, 0, 0];
        expected.extend([K_WRITE_BULK, 0x00, 0x21, 0, 0, 3, 0, 0, 0]);
        expected.extend([1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);
        expected.extend([K_WRITE, 0x14, 0x20, 0, 0, 1, 0, 0, 0]);
        expected.extend([K_READ, 0x18, 0x20, 0, 0]);
        expected.extend([K_READ_BULK, 0x00, 0x21, 0, 0, 2, 0, 0, 0]);
        assert_eq!(body, expected);
        let mut decoded = Vec::new();
        let mut origin = Vec::new();
        let mut c = Cursor::new(&body[1..]);
        decode_batch(&mut c, &mut decoded, &mut origin).unwrap();
        assert_eq!(decoded, ops);
        assert_eq!(origin, vec![0, 0, 0, 1, 2, 3, 3]);
    }

    #[test]
    fn truncated_or_lying_messages_are_refused() {
        let mut decoded = Vec::new();
        let mut origin = Vec::new();
        for bad in [
            &[5u8, 0, 0, 0][..],                                         // 5 ops, none there
            &[1, 0, 0, 0, 9, 0, 0, 0, 0],                                // unknown kind
            &[1, 0, 0, 0, K_WRITE_BULK, 0, 0, 0, 0, 255, 255, 255, 255], // huge bulk
            &[1, 0, 0, 0, K_READ_BULK, 0, 0, 0, 0, 255, 255, 255, 255],
            &[0, 0, 0, 0, 7], // stray byte
        ] {
            let mut c = Cursor::new(bad);
            assert!(
                decode_batch(&mut c, &mut decoded, &mut origin).is_err(),
                "{bad:?}"
            );
        }
    }
}
