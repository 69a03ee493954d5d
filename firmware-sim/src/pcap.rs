//! Reading and writing pcap files of Ethernet frames (for `nlbctl sim` and tests): classic
//! pcap, link type Ethernet, readable by tcpdump and Wireshark.

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::DataLink;
use std::io::{Read, Write};
use std::time::Duration;

/// Why a pcap file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// The file is not a pcap file, or is damaged.
    #[error("not a readable pcap file: {0}")]
    Format(#[source] pcap_file::PcapError),
    /// Packet `index` (0-based) is damaged or cut off.
    #[error("packet {index} of the pcap file is unreadable: {source}")]
    Packet {
        /// Index of the packet.
        index: usize,
        /// The underlying error.
        #[source]
        source: pcap_file::PcapError,
    },
    /// Link type other than Ethernet.
    #[error("pcap link type {0:?} is not Ethernet (only Ethernet captures can be simulated)")]
    NotEthernet(DataLink),
    /// A captured packet was cut by the snap length, so it is not the frame that was sent.
    #[error("packet {index} was truncated by the capture ({captured} of {original} bytes)")]
    Truncated {
        /// Index of the packet.
        index: usize,
        /// Bytes captured.
        captured: usize,
        /// Bytes on the wire.
        original: u32,
    },
    /// Writing failed.
    #[error("cannot write pcap: {0}")]
    Write(#[source] pcap_file::PcapError),
}

/// One frame of a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Capture time since the Unix epoch.
    pub timestamp: Duration,
    /// The Ethernet frame (without FCS).
    pub data: Vec<u8>,
}

/// Reads every frame of an Ethernet pcap capture.
pub fn read_frames<R: Read>(reader: R) -> Result<Vec<Frame>, PcapError> {
    let mut r = PcapReader::new(reader).map_err(PcapError::Format)?;
    let link = r.header().datalink;
    if link != DataLink::ETHERNET {
        return Err(PcapError::NotEthernet(link));
    }
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let index = out.len();
        let p = p.map_err(|source| PcapError::Packet { index, source })?;
        if (p.orig_len as usize) > p.data.len() {
            return Err(PcapError::Truncated {
                index,
                captured: p.data.len(),
                original: p.orig_len,
            });
        }
        out.push(Frame {
            timestamp: p.timestamp,
            data: p.data.into_owned(),
        });
    }
    Ok(out)
}

/// Writes a pcap stream of Ethernet frames frame by frame.
#[derive(Debug)]
pub struct FrameWriter<W: Write> {
    inner: PcapWriter<W>,
}

impl<W: Write> FrameWriter<W> {
    /// Starts a capture (microsecond timestamps, snap length 65535, link type Ethernet).
    pub fn new(writer: W) -> Result<Self, PcapError> {
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            endianness: pcap_file::Endianness::Little,
            ..PcapHeader::default()
        };
        Ok(FrameWriter {
            inner: PcapWriter::with_header(writer, header).map_err(PcapError::Write)?,
        })
    }

    /// Appends one frame.
    pub fn write(&mut self, timestamp: Duration, frame: &[u8]) -> Result<(), PcapError> {
        let p = PcapPacket::new(timestamp, frame.len() as u32, frame);
        self.inner.write_packet(&p).map_err(PcapError::Write)?;
        Ok(())
    }

    /// Finishes and returns the underlying writer.
    pub fn into_inner(self) -> W {
        self.inner.into_writer()
    }
}
