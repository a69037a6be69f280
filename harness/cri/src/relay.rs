//! One CRI proxy connection, relayed at HTTP/2's frame level: every frame passes through as it
//! came, except the header blocks of the client's requests, which are decoded (HPACK), get their
//! `:path` renamed from `runtime.v1alpha2` to `runtime.v1` (and an `:authority` that is no authority
//! replaced), and are encoded again.
//!
//! Why frames and not an HTTP/2 server: the 1.20 kubelet's gRPC (grpc-go 1.27) names a unix
//! socket's path as the request's authority (`:authority: /run/.../cri-proxy.sock`). containerd's Go
//! server takes that; an HTTP/2 server that checks its requests as the RFC says (hyper's h2) resets
//! the stream with PROTOCOL_ERROR before any handler sees it, and the kubelet never starts. Below
//! the request layer nothing needs to be understood but the header blocks: flow control, settings,
//! pings and stream resets are between the kubelet and containerd, untouched.
//!
//! The client's header blocks are encoded again without the dynamic table (literals, never
//! indexed), so the runtime's decoder state is only what those literals make it: nothing to keep in
//! step with the client's encoder. A block is cut into frames of at most 16 KiB, the smallest maximum
//! frame size a peer may set. The runtime's answers are copied as bytes; with call logging on, their
//! header blocks are decoded too (to read `grpc-status`), which keeps a decoder in step with the
//! runtime's encoder and changes nothing that is sent.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The client's connection preface (RFC 9113, 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const PUSH_PROMISE: u8 = 0x5;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The smallest SETTINGS_MAX_FRAME_SIZE a peer may announce: header blocks sent on are cut to it.
pub const MAX_FRAME: usize = 16_384;

const FROM: &[u8] = b"/runtime.v1alpha2.";
const TO: &[u8] = b"/runtime.v1.";

/// Which end a frame came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The kubelet (or any CRI client).
    Client,
    /// The runtime (containerd).
    Runtime,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Client => "client",
            Side::Runtime => "runtime",
        })
    }
}

#[derive(Debug, Error)]
pub enum RelayError {
    #[error("reading the client's connection preface: {source}")]
    ReadPreface {
        #[source]
        source: io::Error,
    },
    #[error("the client did not open with HTTP/2's connection preface (a gRPC client over h2c does)")]
    NotHttp2,
    #[error("reading a frame from the {side}: {source}")]
    Read {
        side: Side,
        #[source]
        source: io::Error,
    },
    #[error("writing to the {side}: {source}")]
    Write {
        side: Side,
        #[source]
        source: io::Error,
    },
    #[error("a {kind} frame from the {side} on stream {stream}: {message}")]
    Malformed { side: Side, kind: &'static str, stream: u32, message: String },
    #[error("decoding the header block of stream {stream} from the {side}: {message}")]
    Hpack { side: Side, stream: u32, message: String },
}

/// One frame: its header's fields and its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The frame as bytes on the wire: the 9-byte header, then the payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let len = self.payload.len() as u32;
        out.extend_from_slice(&len.to_be_bytes()[1..]);
        out.push(self.kind);
        out.push(self.flags);
        out.extend_from_slice(&(self.stream & 0x7fff_ffff).to_be_bytes());
        out.extend_from_slice(&self.payload);
    }

    /// The frame as bytes on the wire, on their own.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.payload.len() + 9);
        self.encode(&mut bytes);
        bytes
    }

    fn kind_name(&self) -> &'static str {
        match self.kind {
            HEADERS => "HEADERS",
            PUSH_PROMISE => "PUSH_PROMISE",
            CONTINUATION => "CONTINUATION",
            _ => "other",
        }
    }
}

/// The next frame, or `None` where the peer closed the connection between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R, side: Side) -> Result<Option<Frame>, RelayError> {
    let mut head = [0u8; 9];
    let mut got = 0;
    while got < head.len() {
        let n = reader.read(&mut head[got..]).await.map_err(|source| RelayError::Read { side, source })?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(RelayError::Read { side, source: io::Error::new(io::ErrorKind::UnexpectedEof, "the connection closed inside a frame header") });
        }
        got += n;
    }
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload).await.map_err(|source| RelayError::Read { side, source })?;
    Ok(Some(Frame { kind: head[3], flags: head[4], stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff, payload }))
}

/// A HEADERS or PUSH_PROMISE frame's parts: the priority fields (HEADERS with PRIORITY) or the promised
/// stream (PUSH_PROMISE), kept as bytes, and the header block fragment without padding.
fn split_block_frame(frame: &Frame, side: Side) -> Result<(Vec<u8>, Vec<u8>), RelayError> {
    let bad = |message: &str| RelayError::Malformed { side, kind: frame.kind_name(), stream: frame.stream, message: message.into() };
    let mut body: &[u8] = &frame.payload;
    let mut pad = 0usize;
    if frame.flags & PADDED != 0 {
        let (&n, rest) = body.split_first().ok_or_else(|| bad("PADDED with no pad length"))?;
        pad = n as usize;
        body = rest;
    }
    let fixed = match frame.kind {
        HEADERS if frame.flags & PRIORITY != 0 => 5,
        PUSH_PROMISE => 4,
        _ => 0,
    };
    if body.len() < fixed + pad {
        return Err(bad("its padding and fields are longer than the frame"));
    }
    Ok((body[..fixed].to_vec(), body[fixed..body.len() - pad].to_vec()))
}

/// What [`rewrite_request`] changed in one request's header list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rewritten {
    /// The `:path` as the client sent it.
    pub path: String,
    /// The `:path` sent on (the same where nothing was renamed).
    pub sent: String,
}

/// A request's header list as the runtime gets it: `/runtime.v1alpha2.<Service>/<Method>` becomes
/// `/runtime.v1.<Service>/<Method>` (any other path stays), and an `:authority` with characters no
/// authority has (grpc-go's socket path) becomes `localhost`, as newer gRPC clients send for a unix
/// socket. Nothing else changes.
pub fn rewrite_request(headers: &mut [(Vec<u8>, Vec<u8>)]) -> Rewritten {
    let mut seen = Rewritten::default();
    for (name, value) in headers.iter_mut() {
        match name.as_slice() {
            b":path" => {
                seen.path = String::from_utf8_lossy(value).into_owned();
                if let Some(rest) = value.strip_prefix(FROM) {
                    let mut renamed = TO.to_vec();
                    renamed.extend_from_slice(rest);
                    *value = renamed;
                }
                seen.sent = String::from_utf8_lossy(value).into_owned();
            }
            b":authority" if !valid_authority(value) => *value = b"localhost".to_vec(),
            _ => {}
        }
    }
    seen
}

/// Whether a value reads as an authority (`host[:port]`, RFC 3986's characters, no path).
fn valid_authority(value: &[u8]) -> bool {
    !value.is_empty() && value.iter().all(|&c| c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:[]%@".contains(&c))
}

/// Header frames for one header block sent on: HEADERS (with the original's END_STREAM and priority
/// fields) and as many CONTINUATIONs as the block needs, the last with END_HEADERS.
pub fn block_frames(stream: u32, end_stream: bool, priority: &[u8], block: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(block.len() + 32);
    let first_room = MAX_FRAME - priority.len();
    let (first, mut rest) = block.split_at(block.len().min(first_room));
    let mut flags = if end_stream { END_STREAM } else { 0 };
    if !priority.is_empty() {
        flags |= PRIORITY;
    }
    if rest.is_empty() {
        flags |= END_HEADERS;
    }
    let mut payload = priority.to_vec();
    payload.extend_from_slice(first);
    Frame { kind: HEADERS, flags, stream, payload }.encode(&mut out);
    while !rest.is_empty() {
        let (chunk, after) = rest.split_at(rest.len().min(MAX_FRAME));
        rest = after;
        let flags = if rest.is_empty() { END_HEADERS } else { 0 };
        Frame { kind: CONTINUATION, flags, stream, payload: chunk.to_vec() }.encode(&mut out);
    }
    out
}

/// Encodes a header list as literals that never touch the dynamic table (RFC 7541, 6.2.2, with a
/// literal name): a decoder's state after it is the state before it.
pub fn encode_literals(headers: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    fn integer(out: &mut Vec<u8>, first: u8, prefix_bits: u8, mut value: usize) {
        let max = (1usize << prefix_bits) - 1;
        if value < max {
            out.push(first | value as u8);
            return;
        }
        out.push(first | max as u8);
        value -= max;
        while value >= 128 {
            out.push((value % 128) as u8 | 0x80);
            value /= 128;
        }
        out.push(value as u8);
    }
    let mut out = Vec::new();
    for (name, value) in headers {
        // Literal header field without indexing, new name: 0000 0000, then the name and the value as
        // plain (not Huffman-coded) strings.
        out.push(0x00);
        integer(&mut out, 0x00, 7, name.len());
        out.extend_from_slice(name);
        integer(&mut out, 0x00, 7, value.len());
        out.extend_from_slice(value);
    }
    out
}

/// What [`next_item`] reads: a frame that is no part of a header block, or a whole header block.
pub enum Item {
    Frame(Frame),
    /// A header block: the frame that opened it (HEADERS or PUSH_PROMISE), that frame's fixed fields
    /// (priority, promised stream), the block's bytes, and its frames as they came on the wire.
    Block { first: Frame, fields: Vec<u8>, block: Vec<u8>, raw: Vec<u8> },
}

/// Reads the next item from one side, gathering a header block whole (RFC 9113, 4.3: a block's
/// frames come one after the other, nothing between them); `None` once the side closed.
pub async fn next_item<R: AsyncRead + Unpin>(reader: &mut R, side: Side) -> Result<Option<Item>, RelayError> {
    let Some(frame) = read_frame(reader, side).await? else { return Ok(None) };
    match frame.kind {
        HEADERS | PUSH_PROMISE => {}
        CONTINUATION => return Err(RelayError::Malformed { side, kind: "CONTINUATION", stream: frame.stream, message: "no header block is open".into() }),
        _ => return Ok(Some(Item::Frame(frame))),
    }
    let (fields, mut block) = split_block_frame(&frame, side)?;
    let mut raw = Vec::with_capacity(frame.payload.len() + 9);
    frame.encode(&mut raw);
    let mut last_flags = frame.flags;
    while last_flags & END_HEADERS == 0 {
        let Some(more) = read_frame(reader, side).await? else {
            return Err(RelayError::Read { side, source: io::Error::new(io::ErrorKind::UnexpectedEof, "the connection closed inside a header block") });
        };
        if more.kind != CONTINUATION || more.stream != frame.stream {
            return Err(RelayError::Malformed {
                side,
                kind: more.kind_name(),
                stream: more.stream,
                message: format!("came where a CONTINUATION of stream {} was due", frame.stream),
            });
        }
        block.extend_from_slice(&more.payload);
        more.encode(&mut raw);
        last_flags = more.flags;
    }
    Ok(Some(Item::Block { first: frame, fields, block, raw }))
}

/// Where a relayed call's line goes (`--log-calls`).
pub type CallLog = Arc<dyn Fn(String) + Send + Sync>;

/// Calls in flight on one connection, by stream: the path as sent and as sent on, and when.
type Calls = Arc<Mutex<HashMap<u32, (Rewritten, Instant)>>>;

/// Relays one connection until both sides have closed it (or one fails): the client's frames to
/// the runtime, each request's header block renamed ([`rewrite_request`]); the runtime's bytes back
/// unchanged. With `log`, one line per finished call: `<path> -> <path sent> <grpc-status> <ms>`.
pub async fn relay<C, U>(client: C, runtime: U, log: Option<CallLog>) -> Result<(), RelayError>
where
    C: AsyncRead + AsyncWrite + Unpin + Send,
    U: AsyncRead + AsyncWrite + Unpin + Send,
{
    let (mut client_r, mut client_w) = tokio::io::split(client);
    let (mut runtime_r, mut runtime_w) = tokio::io::split(runtime);
    let calls: Calls = Arc::default();
    let up = async {
        let mut preface = [0u8; 24];
        client_r.read_exact(&mut preface).await.map_err(|source| RelayError::ReadPreface { source })?;
        if &preface != PREFACE {
            return Err(RelayError::NotHttp2);
        }
        let to_runtime = |source| RelayError::Write { side: Side::Runtime, source };
        runtime_w.write_all(PREFACE).await.map_err(to_runtime)?;
        let mut decoder = loona_hpack::Decoder::new();
        while let Some(item) = next_item(&mut client_r, Side::Client).await? {
            let bytes = match item {
                Item::Frame(frame) => frame.to_bytes(),
                Item::Block { first, .. } if first.kind != HEADERS => {
                    return Err(RelayError::Malformed { side: Side::Client, kind: "PUSH_PROMISE", stream: first.stream, message: "a client never pushes".into() });
                }
                Item::Block { first, fields, block, .. } => {
                    let mut headers = decoder
                        .decode(&block)
                        .map_err(|e| RelayError::Hpack { side: Side::Client, stream: first.stream, message: format!("{e:?}") })?;
                    let seen = rewrite_request(&mut headers);
                    if log.is_some() && !seen.path.is_empty() {
                        calls.lock().expect("calls lock").insert(first.stream, (seen, Instant::now()));
                    }
                    block_frames(first.stream, first.flags & END_STREAM != 0, &fields, &encode_literals(&headers))
                }
            };
            runtime_w.write_all(&bytes).await.map_err(to_runtime)?;
        }
        runtime_w.shutdown().await.map_err(to_runtime)
    };
    let down = async {
        let to_client = |source| RelayError::Write { side: Side::Client, source };
        match &log {
            None => {
                tokio::io::copy(&mut runtime_r, &mut client_w).await.map_err(to_client)?;
            }
            Some(log) => {
                let mut decoder = loona_hpack::Decoder::new();
                while let Some(item) = next_item(&mut runtime_r, Side::Runtime).await? {
                    let bytes = match item {
                        Item::Frame(frame) => frame.to_bytes(),
                        Item::Block { first, block, raw, .. } => {
                            let headers = decoder
                                .decode(&block)
                                .map_err(|e| RelayError::Hpack { side: Side::Runtime, stream: first.stream, message: format!("{e:?}") })?;
                            if first.flags & END_STREAM != 0 {
                                let status = headers.iter().find(|(n, _)| n == b"grpc-status").map(|(_, v)| String::from_utf8_lossy(v).into_owned());
                                if let Some((seen, at)) = calls.lock().expect("calls lock").remove(&first.stream) {
                                    log(format!("{} -> {} {} {}ms", seen.path, seen.sent, status.as_deref().unwrap_or("-"), at.elapsed().as_millis()));
                                }
                            }
                            // The frames as the runtime sent them, padding and all.
                            raw
                        }
                    };
                    client_w.write_all(&bytes).await.map_err(to_client)?;
                }
            }
        }
        client_w.shutdown().await.map_err(to_client)
    };
    // Each direction ends when its sender closes; the first that fails ends both.
    tokio::pin!(up, down);
    let (mut up_done, mut down_done) = (false, false);
    while !(up_done && down_done) {
        tokio::select! {
            r = &mut up, if !up_done => { r?; up_done = true; }
            r = &mut down, if !down_done => { r?; down_done = true; }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    fn headers(list: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        list.iter().map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
    }

    #[test]
    fn the_path_of_a_v1alpha2_call_is_renamed_and_nothing_else() {
        let mut h = headers(&[(":method", "POST"), (":path", "/runtime.v1alpha2.RuntimeService/Version"), (":authority", "/run/faultlab/cri-proxy.sock"), ("te", "trailers")]);
        let seen = rewrite_request(&mut h);
        assert_eq!(seen, Rewritten { path: "/runtime.v1alpha2.RuntimeService/Version".into(), sent: "/runtime.v1.RuntimeService/Version".into() });
        assert_eq!(h, headers(&[(":method", "POST"), (":path", "/runtime.v1.RuntimeService/Version"), (":authority", "localhost"), ("te", "trailers")]));
        for path in ["/runtime.v1.ImageService/ListImages", "/grpc.health.v1.Health/Check", "/runtime.v1alpha2"] {
            let mut h = headers(&[(":path", path), (":authority", "localhost:10250")]);
            assert_eq!(rewrite_request(&mut h).sent, path);
            assert_eq!(h, headers(&[(":path", path), (":authority", "localhost:10250")]), "{path}");
        }
    }

    #[test]
    fn literals_decode_to_the_same_list_and_leave_the_table_empty() {
        let long = "x".repeat(300);
        let list = headers(&[(":path", "/runtime.v1.RuntimeService/Version"), ("grpc-timeout", "2M"), ("x-long", &long)]);
        let block = encode_literals(&list);
        let mut decoder = loona_hpack::Decoder::new();
        assert_eq!(decoder.decode(&block).unwrap(), list);
        // Again: were anything indexed, the same decoder would now read indices where there are none.
        assert_eq!(decoder.decode(&block).unwrap(), list);
    }

    #[tokio::test]
    async fn a_long_block_is_cut_into_continuations_and_read_back_whole() {
        let block: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
        let wire = block_frames(7, true, &[0, 0, 0, 3, 15], &block);
        let mut reader: &[u8] = &wire;
        let first = read_frame(&mut reader, Side::Client).await.unwrap().unwrap();
        assert_eq!((first.kind, first.flags, first.stream, first.payload.len()), (HEADERS, END_STREAM | PRIORITY, 7, MAX_FRAME));
        let mut reader: &[u8] = &wire;
        let Some(Item::Block { first, fields, block: got, raw }) = next_item(&mut reader, Side::Client).await.unwrap() else { panic!("a block") };
        assert_eq!((first.stream, fields), (7, vec![0, 0, 0, 3, 15]));
        assert_eq!(got, block);
        assert_eq!(raw, wire);
        assert!(next_item(&mut reader, Side::Client).await.unwrap().is_none());
        // A frame of another stream inside the block is refused.
        let mut bad = block_frames(7, false, &[], &block);
        let mut other = Vec::new();
        Frame { kind: CONTINUATION, flags: END_HEADERS, stream: 9, payload: vec![0] }.encode(&mut other);
        bad.truncate(9 + MAX_FRAME);
        bad.extend_from_slice(&other);
        let mut reader: &[u8] = &bad;
        let err = next_item(&mut reader, Side::Client).await.err().expect("refused").to_string();
        assert!(err.contains("where a CONTINUATION of stream 7 was due"), "{err}");
    }

    /// A real HTTP/2 client (hyper: HPACK with its dynamic table, header blocks over several frames,
    /// flow control) through the relay to a real HTTP/2 server: the server sees v1 paths, the client
    /// gets bodies and trailers as sent.
    #[tokio::test]
    async fn calls_go_through_renamed_with_bodies_and_trailers() {
        let (client_io, relay_client) = tokio::io::duplex(64 * 1024);
        let (relay_runtime, server_io) = tokio::io::duplex(64 * 1024);
        let lines = Arc::new(Mutex::new(Vec::new()));
        let log: CallLog = {
            let lines = lines.clone();
            Arc::new(move |line| lines.lock().unwrap().push(line))
        };
        let relay = tokio::spawn(relay(relay_client, relay_runtime, Some(log)));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let server = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let seen = seen.clone();
                    async move {
                        let path = req.uri().path().to_owned();
                        let big = req.headers().get("x-big").map(|v| v.len()).unwrap_or(0);
                        seen.lock().unwrap().push((path.clone(), big));
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let mut trailers = hyper::HeaderMap::new();
                        trailers.insert("grpc-status", "0".parse().unwrap());
                        let answer = Full::new(body).with_trailers(async move { Some(Ok::<_, Infallible>(trailers)) });
                        Ok::<_, Infallible>(hyper::Response::builder().header("content-type", "application/grpc").body(answer).unwrap())
                    }
                });
                hyper::server::conn::http2::Builder::new(TokioExecutor::new()).max_header_list_size(1 << 20).serve_connection(TokioIo::new(server_io), service).await
            })
        };
        let (mut sender, connection) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(client_io)).await.unwrap();
        tokio::spawn(connection);
        let big = "b".repeat(40_000);
        for (path, extra) in [
            ("/runtime.v1alpha2.RuntimeService/Version", None),
            ("/runtime.v1alpha2.ImageService/ImageFsInfo", None),
            ("/runtime.v1.ImageService/ListImages", None),
            ("/runtime.v1alpha2.RuntimeService/Status", Some(big.as_str())),
        ] {
            let mut request = hyper::Request::post(format!("http://localhost{path}")).header("content-type", "application/grpc").header("te", "trailers");
            if let Some(extra) = extra {
                request = request.header("x-big", extra);
            }
            let body = Bytes::from(format!("body of {path}").repeat(100));
            let response = sender.send_request(request.body(Full::new(body.clone())).unwrap()).await.unwrap();
            let collected = response.into_body().collect().await.unwrap();
            let trailers = collected.trailers().cloned().unwrap_or_else(|| panic!("no trailers for {path}"));
            assert_eq!(collected.to_bytes(), body, "{path}");
            assert_eq!(trailers.get("grpc-status").unwrap(), "0");
        }
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                ("/runtime.v1.RuntimeService/Version".to_string(), 0),
                ("/runtime.v1.ImageService/ImageFsInfo".to_string(), 0),
                ("/runtime.v1.ImageService/ListImages".to_string(), 0),
                ("/runtime.v1.RuntimeService/Status".to_string(), 40_000),
            ]
        );
        let lines = lines.lock().unwrap().clone();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].starts_with("/runtime.v1alpha2.RuntimeService/Version -> /runtime.v1.RuntimeService/Version 0 "), "{lines:?}");
        drop(sender);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), server).await.expect("the server ends once the client closes");
        tokio::time::timeout(std::time::Duration::from_secs(5), relay).await.expect("the relay ends").unwrap().unwrap();
    }

    /// grpc-go 1.27's request, as the 1.20 kubelet sends it: its socket's path as the authority, which an
    /// HTTP/2 server that checks requests refuses. The runtime gets `localhost` and the v1 path.
    #[tokio::test]
    async fn a_socket_path_authority_reaches_the_runtime_as_localhost() {
        let (mut client, relay_client) = tokio::io::duplex(64 * 1024);
        let (relay_runtime, mut runtime) = tokio::io::duplex(64 * 1024);
        let relay = tokio::spawn(relay(relay_client, relay_runtime, None));
        let mut encoder = loona_hpack::Encoder::new();
        let list = [(&b":method"[..], &b"POST"[..]), (b":scheme", b"http"), (b":path", b"/runtime.v1alpha2.RuntimeService/Version"), (b":authority", b"/run/faultlab/cri-proxy.sock"), (b"content-type", b"application/grpc")];
        let mut wire = PREFACE.to_vec();
        Frame { kind: 0x4, flags: 0, stream: 0, payload: vec![] }.encode(&mut wire);
        wire.extend(block_frames(1, false, &[], &encoder.encode(list.iter().copied())));
        Frame { kind: 0x0, flags: END_STREAM, stream: 1, payload: vec![0, 0, 0, 0, 0] }.encode(&mut wire);
        client.write_all(&wire).await.unwrap();
        let mut preface = [0u8; 24];
        runtime.read_exact(&mut preface).await.unwrap();
        assert_eq!(&preface, PREFACE);
        let settings = read_frame(&mut runtime, Side::Runtime).await.unwrap().unwrap();
        assert_eq!(settings.kind, 0x4);
        let Some(Item::Block { block, .. }) = next_item(&mut runtime, Side::Runtime).await.unwrap() else { panic!("a header block") };
        let got = loona_hpack::Decoder::new().decode(&block).unwrap();
        assert_eq!(got, headers(&[(":method", "POST"), (":scheme", "http"), (":path", "/runtime.v1.RuntimeService/Version"), (":authority", "localhost"), ("content-type", "application/grpc")]));
        let data = read_frame(&mut runtime, Side::Runtime).await.unwrap().unwrap();
        assert_eq!((data.kind, data.flags, data.payload), (0x0, END_STREAM, vec![0, 0, 0, 0, 0]));
        // Something that is not HTTP/2 ends the connection with a clear error.
        drop(client);
        drop(runtime);
        let _ = relay.await.unwrap();
        let (mut client, relay_client) = tokio::io::duplex(1024);
        let (relay_runtime, _runtime) = tokio::io::duplex(1024);
        client.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let err = super::relay(relay_client, relay_runtime, None).await.unwrap_err().to_string();
        assert!(err.contains("connection preface"), "{err}");
    }
}
