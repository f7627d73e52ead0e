//! RESP2/RESP3 for rill: an incremental request parser with Redis' limits and a reply writer.
//!
//! No I/O happens here. The server appends bytes read from a socket to a `BytesMut`, asks
//! [`RequestParser::parse`] for complete requests, and renders [`Reply`] values into an output
//! buffer with [`write_reply`] in the connection's [`Protocol`]: a `BytesMut`, or an
//! [`OutputBuffer`], which holds large payloads by reference instead of copying them.
//! [`parse_reply`] reads replies back, for tests and clients.

mod inline;
mod output;
mod parse_reply;
mod reply;
mod request;
mod write;

pub use output::{OutputBuffer, ReplyTarget, SHARED_PAYLOAD_MIN_BYTES, WRITE_SLICES_MAX};
pub use parse_reply::{parse_reply, MAX_REPLY_DEPTH};
pub use reply::{Protocol, Reply};
pub use request::{
    Limits, ProtocolError, RequestParser, DEFAULT_MAX_BULK_BYTES, DEFAULT_MAX_INLINE_BYTES, RESERVE_AHEAD_MAX_BYTES,
    UNAUTHENTICATED_MAX_ARGS, UNAUTHENTICATED_MAX_BULK_BYTES,
};
pub use write::{double_text, referenced_bytes, write_reply, write_request, write_request_iter, write_request_vec};

#[cfg(test)]
mod tests;
