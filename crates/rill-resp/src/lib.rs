//! RESP2/RESP3 for rill: an incremental request parser with Redis' limits and a reply writer.
//!
//! No I/O happens here. The server appends bytes read from a socket to a `BytesMut`, asks
//! [`RequestParser::parse`] for complete requests, and renders [`Reply`] values into an output
//! buffer with [`write_reply`] in the connection's [`Protocol`].

mod reply;

pub use reply::{Protocol, Reply};
