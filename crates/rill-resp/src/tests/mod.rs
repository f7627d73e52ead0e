//! Unit and property tests for the whole crate, in one test binary.
//!
//! `request` holds the raw-byte tests of the request parser (every Redis error, partial frames,
//! pipelining, inline quoting); `write` and `parse_reply` the exact bytes of every reply type;
//! `roundtrip` the proptests tying the three together.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod output;
mod parse_reply;
mod request;
mod roundtrip;
mod write;
