//! etcd's messages as its JSON gateway writes them: protobuf's JSON mapping with the proto
//! field names (`mod_revision`, `grantedTTL`), 64-bit integers as strings, `bytes` as base64,
//! enums by name, and fields at their default value left out (an event's `type` PUT, a
//! transaction's `succeeded` false, a lease's TTL 0).

use base64::Engine as _;
use serde::{Deserialize, Deserializer};

/// base64 as the gateway writes and reads `bytes` fields.
pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A 64-bit integer: a JSON string (what protobuf's mapping writes) or a number.
pub(crate) fn int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int {
        Number(i64),
        Text(String),
    }
    match Int::deserialize(d)? {
        Int::Number(n) => Ok(n),
        Int::Text(s) => s
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("{s:?} is not a 64-bit integer"))),
    }
}

/// A `bytes` field.
fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let s = String::deserialize(d)?;
    base64::engine::general_purpose::STANDARD
        .decode(s.as_bytes())
        .map_err(|e| serde::de::Error::custom(format!("not base64: {e}")))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Header {
    #[serde(deserialize_with = "int")]
    pub revision: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct KeyValue {
    #[serde(deserialize_with = "bytes")]
    pub key: Vec<u8>,
    #[serde(deserialize_with = "int")]
    pub create_revision: i64,
    #[serde(deserialize_with = "int")]
    pub mod_revision: i64,
    #[serde(deserialize_with = "int")]
    pub version: i64,
    #[serde(deserialize_with = "bytes")]
    pub value: Vec<u8>,
    #[serde(deserialize_with = "int")]
    pub lease: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RangeResponse {
    pub header: Header,
    pub kvs: Vec<KeyValue>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct PutResponse {
    pub header: Header,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct DeleteRangeResponse {
    pub header: Header,
    #[serde(deserialize_with = "int")]
    pub deleted: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ResponseOp {
    pub response_range: Option<RangeResponse>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct TxnResponse {
    pub header: Header,
    pub succeeded: bool,
    pub responses: Vec<ResponseOp>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LeaseGrantResponse {
    #[serde(rename = "ID", deserialize_with = "int")]
    pub id: i64,
    #[serde(rename = "TTL", deserialize_with = "int")]
    pub ttl: i64,
    pub error: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LeaseKeepAliveResponse {
    #[serde(rename = "TTL", deserialize_with = "int")]
    pub ttl: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LeaseTimeToLiveResponse {
    #[serde(rename = "TTL", deserialize_with = "int")]
    pub ttl: i64,
    #[serde(rename = "grantedTTL", deserialize_with = "int")]
    pub granted_ttl: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AuthenticateResponse {
    pub token: String,
}

/// An event's type: `PUT` (0, left out) or `DELETE` (1).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    #[default]
    Put,
    Delete,
}

impl<'de> Deserialize<'de> for EventType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(i64),
            Name(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(0) => Ok(EventType::Put),
            Raw::Number(1) => Ok(EventType::Delete),
            Raw::Name(n) if n == "PUT" => Ok(EventType::Put),
            Raw::Name(n) if n == "DELETE" => Ok(EventType::Delete),
            _ => Err(serde::de::Error::custom(
                "an event type other than PUT or DELETE",
            )),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Event {
    #[serde(rename = "type")]
    pub kind: EventType,
    pub kv: KeyValue,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WatchResponse {
    pub header: Header,
    pub created: bool,
    pub canceled: bool,
    #[serde(deserialize_with = "int")]
    pub compact_revision: i64,
    pub cancel_reason: String,
    pub events: Vec<Event>,
}

/// An error as the gateway answers a unary call (with an HTTP status other than 200):
/// `{"error": "...", "message": "...", "code": N}` (N: the gRPC status code).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct GatewayError {
    pub error: String,
    pub message: String,
    pub code: i32,
}

/// An error inside a stream (grpc-gateway's stream error object).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct StreamError {
    pub grpc_code: i32,
    pub message: String,
}

/// One message of a stream: `{"result": ...}` or `{"error": {...}}`.
#[derive(Debug, Deserialize)]
pub(crate) struct StreamMessage<T> {
    pub result: Option<T>,
    pub error: Option<StreamError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_gateway_writes_decodes() {
        // Answers as etcd 3.4's gateway prints them (its documentation's curl examples, and
        // a compacted watch as a 3.4 member answered one).
        let r: RangeResponse = serde_json::from_str(
            r#"{"header":{"cluster_id":"12585971608760269493","member_id":"13847567121247652255","revision":"2","raft_term":"3"},"kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1","value":"YmFy"}],"count":"1"}"#,
        )
        .unwrap();
        assert_eq!(r.header.revision, 2);
        assert_eq!(
            (r.kvs[0].key.as_slice(), r.kvs[0].value.as_slice()),
            (&b"foo"[..], &b"bar"[..])
        );
        assert_eq!((r.kvs[0].mod_revision, r.kvs[0].lease), (2, 0));
        let w: StreamMessage<WatchResponse> = serde_json::from_str(
            r#"{"result":{"header":{"cluster_id":"1","member_id":"2","revision":"2","raft_term":"2"},"events":[{"kv":{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1","value":"YmFy"}},{"type":"DELETE","kv":{"key":"Zm9v","mod_revision":"3"}}]}}"#,
        )
        .unwrap();
        let w = w.result.unwrap();
        assert_eq!(w.events[0].kind, EventType::Put);
        assert_eq!(w.events[1].kind, EventType::Delete);
        assert_eq!(w.events[1].kv.mod_revision, 3);
        let c: StreamMessage<WatchResponse> = serde_json::from_str(
            r#"{"result":{"header":{"cluster_id":"1","member_id":"2","raft_term":"2"},"canceled":true,"compact_revision":"2"}}"#,
        )
        .unwrap();
        let c = c.result.unwrap();
        assert!(c.canceled && !c.created);
        assert_eq!((c.compact_revision, c.header.revision), (2, 0));
        let t: LeaseTimeToLiveResponse =
            serde_json::from_str(r#"{"header":{},"ID":"7","TTL":"4","grantedTTL":"5"}"#).unwrap();
        assert_eq!((t.ttl, t.granted_ttl), (4, 5));
        // A revoked lease's keep-alive: TTL 0, left out.
        let k: StreamMessage<LeaseKeepAliveResponse> =
            serde_json::from_str(r#"{"result":{"header":{},"ID":"7"}}"#).unwrap();
        assert_eq!(k.result.unwrap().ttl, 0);
        let e: GatewayError = serde_json::from_str(
            r#"{"error":"etcdserver: leader changed","message":"etcdserver: leader changed","code":14}"#,
        )
        .unwrap();
        assert_eq!(e.code, 14);
    }

    #[test]
    fn what_the_gateway_never_writes_is_refused() {
        assert!(serde_json::from_str::<KeyValue>(r#"{"key":"!!"}"#).is_err());
        assert!(serde_json::from_str::<Header>(r#"{"revision":"x"}"#).is_err());
        assert!(serde_json::from_str::<Event>(r#"{"type":"MOVE"}"#).is_err());
        assert_eq!(
            serde_json::from_str::<Header>(r#"{"revision":5}"#)
                .unwrap()
                .revision,
            5
        );
    }
}
