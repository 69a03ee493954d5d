//! nlbctl's side of nlbd's admin socket (`nlb_control::admin_proto`): one request, one reply,
//! over a blocking Unix socket.

use crate::common::CliError;
use nlb_control::admin_proto as proto;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Sends one request to nlbd and returns the answer's data.
pub fn ask<T: serde::de::DeserializeOwned>(
    socket: &Path,
    request: &proto::Request,
) -> Result<T, CliError> {
    let where_ = socket.display();
    let mut stream = UnixStream::connect(socket).map_err(|e| {
        CliError::user(format!(
            "error: cannot reach nlbd at {where_}: {e} (is nlbd running with --admin-socket {where_}, and are you its user?)"
        ))
    })?;
    let io =
        |e: std::io::Error| CliError::internal(format!("error: talking to nlbd at {where_}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(io)?;
    let mut line = serde_json::to_string(request)
        .map_err(|e| CliError::internal(format!("internal error: {e}")))?;
    line.push('\n');
    stream.write_all(line.as_bytes()).map_err(io)?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).map_err(io)?;
    let reply: proto::Reply<T> = serde_json::from_str(&answer).map_err(|e| {
        CliError::internal(format!(
            "error: nlbd at {where_} answered something unexpected: {e}"
        ))
    })?;
    match (reply.ok, reply.data) {
        (true, Some(data)) => Ok(data),
        _ => Err(CliError::internal(format!(
            "error: nlbd: {}",
            reply.error.unwrap_or_else(|| "no answer".into())
        ))),
    }
}
