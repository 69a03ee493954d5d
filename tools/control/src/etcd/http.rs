//! HTTP/1.1 as etcd's JSON gateway needs it, on a blocking socket (TCP, or TLS over TCP):
//! `POST` with a JSON body, answers framed by `Content-Length` or chunked (trailers included:
//! the gateway sends one after an error), read whole or as newline-delimited messages (the
//! gateway's streams: one JSON object, then `\n`, per message).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// The longest status or header line accepted.
const MAX_LINE: usize = 16 * 1024;
/// The most header lines accepted (trailers included).
const MAX_HEADERS: usize = 100;
/// The largest answer read whole: a range over the fleet's whole prefix stays far below.
pub(crate) const MAX_BODY: u64 = 512 * 1024 * 1024;
/// The largest message of a stream (one watch response).
pub(crate) const MAX_MESSAGE: usize = 256 * 1024 * 1024;

/// An etcd client URL: `http://HOST:PORT` or `https://HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Whether the member is reached over TLS.
    pub tls: bool,
    /// The host as written (an IPv6 address in brackets).
    pub host: String,
    /// The port.
    pub port: u16,
}

impl Endpoint {
    /// `HOST:PORT` (the `Host` header).
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The host without an IPv6 address's brackets (what TLS checks the certificate for).
    pub fn bare_host(&self) -> &str {
        self.host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&self.host)
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        write!(f, "{scheme}://{}:{}", self.host, self.port)
    }
}

/// The socket under a connection.
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => &s.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// One connection to one member.
pub(crate) struct Conn {
    reader: BufReader<Stream>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("peer", &self.reader.get_ref().tcp().peer_addr().ok())
            .finish()
    }
}

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// Connects to `ep` (over TLS with `tls`), the TLS handshake included, each step within
/// `timeout`; reads and writes time out after `timeout` too (see [`Conn::set_timeout`]).
pub(crate) fn connect(
    ep: &Endpoint,
    tls: Option<&Arc<rustls::ClientConfig>>,
    timeout: Duration,
) -> io::Result<Conn> {
    let mut last = None;
    let mut tcp = None;
    for addr in (ep.bare_host(), ep.port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let tcp = match (tcp, last) {
        (Some(s), _) => s,
        (None, Some(e)) => return Err(e),
        (None, None) => {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} resolves to no address", ep.bare_host()),
            ))
        }
    };
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(timeout))?;
    tcp.set_write_timeout(Some(timeout))?;
    let stream = match (ep.tls, tls) {
        (false, _) => Stream::Plain(tcp),
        (true, None) => {
            return Err(io::Error::other(
                "an https endpoint without a TLS configuration",
            ))
        }
        (true, Some(config)) => {
            let name = rustls::pki_types::ServerName::try_from(ep.bare_host().to_string())
                .map_err(|e| invalid(format!("`{}` is not a TLS server name: {e}", ep.host)))?;
            let conn = rustls::ClientConnection::new(config.clone(), name)
                .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            // The handshake now, so that a refused certificate is told as such.
            while tls.conn.is_handshaking() {
                tls.conn
                    .complete_io(&mut tls.sock)
                    .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
            }
            Stream::Tls(Box::new(tls))
        }
    };
    Ok(Conn {
        reader: BufReader::with_capacity(64 * 1024, stream),
    })
}

/// The status line and headers of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    pub status: u16,
    /// The server closes the connection after this answer.
    pub close: bool,
    framing: Framing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(u64),
    Chunked,
    /// Until the server closes the connection.
    Eof,
}

/// Where a body is being read.
#[derive(Debug)]
pub(crate) struct Body {
    state: BodyState,
    /// Decoded bytes not yet returned as a message.
    pending: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyState {
    /// This many bytes left (of a `Content-Length` body, or of the current chunk).
    Length(u64),
    /// Between chunks: the next chunk-size line comes.
    ChunkStart,
    /// In a chunk: this many bytes left, then CRLF.
    InChunk(u64),
    Eof,
    Done,
}

impl Conn {
    /// A clone of the socket (to shut it down from another thread).
    pub fn socket(&self) -> io::Result<TcpStream> {
        self.reader.get_ref().tcp().try_clone()
    }

    /// Read and write timeouts (None: block until data comes or the socket is shut down).
    pub fn set_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        let tcp = self.reader.get_ref().tcp();
        tcp.set_read_timeout(timeout)?;
        tcp.set_write_timeout(timeout)
    }

    /// Sends `POST path` with a JSON body (and etcd's token in `Authorization`).
    pub fn send(
        &mut self,
        authority: &str,
        path: &str,
        token: Option<&str>,
        body: &[u8],
    ) -> io::Result<()> {
        let mut req = Vec::with_capacity(body.len() + 256);
        req.extend_from_slice(
            format!(
                "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n",
                body.len()
            )
            .as_bytes(),
        );
        if let Some(token) = token {
            req.extend_from_slice(b"Authorization: ");
            req.extend_from_slice(token.as_bytes());
            req.extend_from_slice(b"\r\n");
        }
        req.extend_from_slice(b"\r\n");
        req.extend_from_slice(body);
        let stream = self.reader.get_mut();
        stream.write_all(&req)?;
        stream.flush()
    }

    /// Reads the status line and headers. An answer that never started (the server closed an
    /// idle connection) is `UnexpectedEof`.
    pub fn read_head(&mut self) -> io::Result<Head> {
        read_head(&mut self.reader)
    }

    /// Reads a whole body (at most [`MAX_BODY`] bytes).
    pub fn read_body(&mut self, head: &Head) -> io::Result<Vec<u8>> {
        let mut body = Body::new(head);
        let mut out = Vec::new();
        while let Some(piece) = body.next_piece(&mut self.reader)? {
            if out.len() as u64 + piece.len() as u64 > MAX_BODY {
                return Err(invalid(format!("an answer larger than {MAX_BODY} bytes")));
            }
            out.extend_from_slice(&piece);
        }
        Ok(out)
    }

    /// The next newline-delimited message of a streamed body; None at its end.
    pub fn read_message(&mut self, body: &mut Body) -> io::Result<Option<Vec<u8>>> {
        body.next_message(&mut self.reader)
    }

    /// Shuts the socket down (a blocked reader in another thread returns).
    pub fn shutdown(&self) {
        let _ = self.reader.get_ref().tcp().shutdown(Shutdown::Both);
    }
}

/// One CRLF- (or LF-) terminated line, without its terminator.
fn read_line(r: &mut impl BufRead) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    let n = r
        .by_ref()
        .take(MAX_LINE as u64 + 2)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return if line.len() > MAX_LINE {
            Err(invalid(format!(
                "a header line longer than {MAX_LINE} bytes"
            )))
        } else {
            Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the connection closed in the middle of a line",
            ))
        };
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| invalid("a header line that is not UTF-8"))
}

fn read_head(r: &mut impl BufRead) -> io::Result<Head> {
    let Some(status_line) = read_line(r)? else {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the connection closed before an answer",
        ));
    };
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let status = parts.next().and_then(|s| s.parse::<u16>().ok());
    let Some(status) = status.filter(|_| version.starts_with("HTTP/1.")) else {
        return Err(invalid(format!(
            "not an HTTP/1.1 status line: {status_line:?}"
        )));
    };
    let mut close = version == "HTTP/1.0";
    let mut length = None;
    let mut chunked = false;
    for _ in 0..MAX_HEADERS {
        let Some(line) = read_line(r)? else {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the connection closed in the headers",
            ));
        };
        if line.is_empty() {
            let framing = if chunked {
                Framing::Chunked
            } else if let Some(n) = length {
                Framing::Length(n)
            } else if status == 204 || status == 304 || (100..200).contains(&status) {
                Framing::Length(0)
            } else {
                close = true;
                Framing::Eof
            };
            return Ok(Head {
                status,
                close,
                framing,
            });
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(invalid(format!("not a header line: {line:?}")));
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                length = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| invalid(format!("Content-Length {value:?}")))?,
                )
            }
            "transfer-encoding" => {
                chunked = value
                    .rsplit(',')
                    .next()
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("chunked"))
            }
            "connection" => {
                close |= value
                    .split(',')
                    .any(|v| v.trim().eq_ignore_ascii_case("close"))
            }
            _ => {}
        }
    }
    Err(invalid(format!("more than {MAX_HEADERS} header lines")))
}

impl Body {
    pub fn new(head: &Head) -> Body {
        let state = match head.framing {
            Framing::Length(0) => BodyState::Done,
            Framing::Length(n) => BodyState::Length(n),
            Framing::Chunked => BodyState::ChunkStart,
            Framing::Eof => BodyState::Eof,
        };
        Body {
            state,
            pending: Vec::new(),
        }
    }

    /// Whether the whole body was read.
    #[cfg(test)]
    pub fn done(&self) -> bool {
        self.state == BodyState::Done && self.pending.is_empty()
    }

    /// The next decoded bytes of the body; None at its end.
    fn next_piece(&mut self, r: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
        loop {
            match self.state {
                BodyState::Done => return Ok(None),
                BodyState::Length(n) | BodyState::InChunk(n) => {
                    let buf = r.fill_buf()?;
                    if buf.is_empty() {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the connection closed in the middle of an answer",
                        ));
                    }
                    let take = buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
                    let piece = buf[..take].to_vec();
                    r.consume(take);
                    let left = n - take as u64;
                    self.state = match self.state {
                        BodyState::Length(_) if left == 0 => BodyState::Done,
                        BodyState::Length(_) => BodyState::Length(left),
                        _ if left == 0 => {
                            // The CRLF after a chunk's data.
                            match read_line(r)? {
                                Some(l) if l.is_empty() => BodyState::ChunkStart,
                                _ => return Err(invalid("no CRLF after a chunk")),
                            }
                        }
                        _ => BodyState::InChunk(left),
                    };
                    return Ok(Some(piece));
                }
                BodyState::ChunkStart => {
                    let Some(line) = read_line(r)? else {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the connection closed between chunks",
                        ));
                    };
                    let size = line.split(';').next().unwrap_or("").trim();
                    let size = u64::from_str_radix(size, 16)
                        .map_err(|_| invalid(format!("not a chunk size: {line:?}")))?;
                    if size == 0 {
                        // Trailers (the gateway sends one after an error), then a blank line.
                        for _ in 0..MAX_HEADERS {
                            match read_line(r)? {
                                Some(l) if l.is_empty() => {
                                    self.state = BodyState::Done;
                                    return Ok(None);
                                }
                                Some(_) => {}
                                None => {
                                    return Err(io::Error::new(
                                        io::ErrorKind::UnexpectedEof,
                                        "the connection closed in the trailers",
                                    ))
                                }
                            }
                        }
                        return Err(invalid(format!("more than {MAX_HEADERS} trailer lines")));
                    }
                    self.state = BodyState::InChunk(size);
                }
                BodyState::Eof => {
                    let buf = r.fill_buf()?;
                    if buf.is_empty() {
                        self.state = BodyState::Done;
                        return Ok(None);
                    }
                    let piece = buf.to_vec();
                    r.consume(piece.len());
                    return Ok(Some(piece));
                }
            }
        }
    }

    /// The next message of a newline-delimited stream (blank lines skipped); None at the end.
    fn next_message(&mut self, r: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
        let mut searched = 0;
        loop {
            if let Some(i) = self.pending[searched..].iter().position(|&b| b == b'\n') {
                let end = searched + i;
                let mut line: Vec<u8> = self.pending.drain(..=end).collect();
                line.pop();
                searched = 0;
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Ok(Some(line));
            }
            searched = self.pending.len();
            if self.pending.len() > MAX_MESSAGE {
                return Err(invalid(format!(
                    "a message longer than {MAX_MESSAGE} bytes"
                )));
            }
            match self.next_piece(r)? {
                Some(piece) => self.pending.extend_from_slice(&piece),
                None => {
                    let last = std::mem::take(&mut self.pending);
                    return Ok((!last.iter().all(u8::is_ascii_whitespace)).then_some(last));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out its bytes a few at a time (as a socket may).
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.data.len().min(self.step).min(buf.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn messages(raw: &[u8], step: usize) -> io::Result<(Head, Vec<String>)> {
        let mut r = BufReader::with_capacity(7, Trickle { data: raw, step });
        let head = read_head(&mut r)?;
        let mut body = Body::new(&head);
        let mut out = Vec::new();
        while let Some(m) = body.next_message(&mut r)? {
            out.push(String::from_utf8(m).unwrap());
        }
        assert!(body.done());
        Ok((head, out))
    }

    #[test]
    fn a_chunked_stream_of_messages_with_a_trailer() {
        // The gateway's watch: one JSON object and a newline per message, chunks split
        // anywhere; after an error a `Grpc-Trailer-…` trailer (as etcd 3.4 sends).
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
            5\r\n{\"a\":\r\n6\r\n1}\n{\"b\r\n4;ext=1\r\n\":2}\r\n1\r\n\n\r\n0\r\nGrpc-Trailer-Content-Type: application/grpc\r\n\r\n";
        for step in [1, 2, 3, 5, 1000] {
            let (head, m) = messages(raw, step).unwrap();
            assert_eq!(head.status, 200);
            assert!(!head.close);
            assert_eq!(m, ["{\"a\":1}", "{\"b\":2}"], "step {step}");
        }
    }

    #[test]
    fn content_length_and_close_delimited_bodies() {
        let raw = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 9\r\nConnection: keep-alive, Close\r\n\r\n{\"x\":1}\nZZZ";
        let (head, m) = messages(raw, 4).unwrap();
        assert_eq!((head.status, head.close), (400, true));
        // The last message needs no newline; bytes past Content-Length are not the body's.
        assert_eq!(m, ["{\"x\":1}", "Z"]);
        let raw = b"HTTP/1.0 200 OK\r\n\r\nline1\nline2";
        let (head, m) = messages(raw, 3).unwrap();
        assert!(head.close);
        assert_eq!(m, ["line1", "line2"]);
    }

    #[test]
    fn broken_answers_are_errors() {
        for raw in [
            &b""[..],
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        ] {
            assert!(
                messages(raw, 2).is_err(),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
        let eof = messages(b"", 1).unwrap_err();
        assert_eq!(eof.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn endpoints_print_as_urls() {
        let ep = Endpoint {
            tls: true,
            host: "[::1]".into(),
            port: 2379,
        };
        assert_eq!(ep.to_string(), "https://[::1]:2379");
        assert_eq!(ep.bare_host(), "::1");
        assert_eq!(ep.authority(), "[::1]:2379");
    }
}
