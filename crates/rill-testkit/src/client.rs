//! [`RawClient`]: RESP over a plain blocking `TcpStream`, replies as the exact bytes sent.

use crate::resp::{encode_command, encode_command_into, escape, frame_len, parse_frame, parse_value, Value};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Read timeout of a new [`RawClient`]; long enough for a blocking command with a small timeout.
pub const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// A blocking RESP connection that returns replies as raw bytes (or parsed, on request).
/// Requests may be pipelined: send many, then read as many replies.
#[derive(Debug)]
pub struct RawClient {
    stream: TcpStream,
    /// Bytes received and not yet returned start at `buf[pos]`.
    buf: Vec<u8>,
    pos: usize,
}

impl RawClient {
    /// Connects to 127.0.0.1:`port`; panics with the address if it cannot.
    pub fn connect(port: u16) -> RawClient {
        RawClient::try_connect(port).unwrap_or_else(|e| panic!("connect 127.0.0.1:{port}: {e}"))
    }

    /// Connects to 127.0.0.1:`port`.
    pub fn try_connect(port: u16) -> io::Result<RawClient> {
        RawClient::try_connect_to(("127.0.0.1", port))
    }

    /// Connects to 127.0.0.1:`port` with another read timeout than [`READ_TIMEOUT`].
    pub fn try_connect_timeout(port: u16, read_timeout: Duration) -> io::Result<RawClient> {
        let client = RawClient::try_connect(port)?;
        client.stream.set_read_timeout(Some(read_timeout))?;
        Ok(client)
    }

    /// Connects to any address, with [`READ_TIMEOUT`] and `TCP_NODELAY`.
    pub fn try_connect_to(addr: impl ToSocketAddrs) -> io::Result<RawClient> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(RawClient { stream, buf: Vec::with_capacity(16 * 1024), pos: 0 })
    }

    /// A client over a connection made elsewhere (one a test accepted, playing a server),
    /// with [`READ_TIMEOUT`].
    pub fn from_stream(stream: TcpStream) -> io::Result<RawClient> {
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        Ok(RawClient { stream, buf: Vec::with_capacity(16 * 1024), pos: 0 })
    }

    /// The local address of the connection (as the server sees the peer).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// Sets the read timeout of later reads; panics if the socket refuses.
    pub fn set_read_timeout(&self, timeout: Duration) {
        self.stream.set_read_timeout(Some(timeout)).unwrap_or_else(|e| panic!("set_read_timeout: {e}"));
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Writes one command as a RESP multibulk request.
    pub fn send_command(&mut self, args: &[&[u8]]) -> io::Result<()> {
        self.send(&encode_command(args))
    }

    /// Sends one command and reads its reply as raw bytes.
    pub fn request(&mut self, args: &[&[u8]]) -> io::Result<Vec<u8>> {
        self.send_command(args)?;
        self.read_reply()
    }

    /// Sends one command and reads its reply, parsed.
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<Value> {
        let mut out = Vec::new();
        encode_command_into(&mut out, args);
        self.send(&out)?;
        self.read_value()
    }

    /// Like [`RawClient::request`] with string arguments, panicking on I/O errors.
    pub fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.request(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// Like [`RawClient::cmd`], parsed.
    pub fn cmd_value(&mut self, args: &[&str]) -> Value {
        let reply = self.cmd(args);
        parse_value(&reply).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// Reads exactly one complete reply (RESP2 or RESP3) and returns its bytes.
    pub fn read_reply(&mut self) -> io::Result<Vec<u8>> {
        loop {
            let pending = self.pending();
            match frame_len(pending) {
                Ok(Some(n)) => {
                    let frame = pending.get(..n).unwrap_or_default().to_vec();
                    self.consume(n);
                    return Ok(frame);
                }
                Ok(None) => {}
                Err(e) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{e} in {}", escape(pending))))
                }
            }
            self.fill()?;
        }
    }

    /// Reads one reply, parsed.
    pub fn read_value(&mut self) -> io::Result<Value> {
        loop {
            match parse_frame(self.pending(), 0) {
                Ok(Some((value, n))) => {
                    self.consume(n);
                    return Ok(value);
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
            self.fill()?;
        }
    }

    /// Reads exactly `n` bytes, whatever they are (for replies a test compares byte by byte
    /// before they are complete, or that are not well-formed RESP).
    pub fn read_exact(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.pending().len() < n {
            self.fill()?;
        }
        let bytes = self.pending().get(..n).unwrap_or_default().to_vec();
        self.consume(n);
        Ok(bytes)
    }

    /// Reads everything the server sends until it closes the connection or `quiet` passes
    /// without new bytes. Returns the bytes and whether the connection was closed.
    pub fn read_until_close(&mut self, quiet: Duration) -> (Vec<u8>, bool) {
        self.set_read_timeout(quiet);
        let mut out = self.pending().to_vec();
        self.consume(out.len());
        let mut chunk = [0u8; 16 * 1024];
        let closed = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => out.extend_from_slice(chunk.get(..n).unwrap_or_default()),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break false, // timed out: still open
            }
        };
        self.set_read_timeout(READ_TIMEOUT);
        (out, closed)
    }

    /// Half-closes the write side (the server sees EOF).
    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    fn pending(&self) -> &[u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
        if self.pos >= self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
    }

    /// Reads what the socket has into the buffer; `UnexpectedEof` when the server closed.
    fn fill(&mut self) -> io::Result<()> {
        if self.pos > 0 {
            // Parsed replies are dropped before the buffer grows, so a long pipeline costs
            // one copy per read, not one per reply.
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let mut chunk = [0u8; 64 * 1024];
        // A signal to the test process (a child exiting) interrupts a blocking read: retry.
        let n = loop {
            match self.stream.read(&mut chunk) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("connection closed; unparsed bytes: {}", escape(self.pending())),
            ));
        }
        self.buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::net::TcpListener;

    /// A peer that sends `chunks` (a pause between them, so replies arrive split) and closes.
    fn peer(chunks: &'static [&'static [u8]]) -> RawClient {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            for chunk in chunks {
                stream.write_all(chunk).unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        RawClient::connect(port)
    }

    #[test]
    fn replies_split_across_reads_come_back_whole_and_in_order() {
        let mut c = peer(&[b"+OK\r\n$5\r\nab", b"cde\r\n*2\r\n:1\r", b"\n:2\r\nxyz"]);
        assert_eq!(c.read_reply().unwrap(), b"+OK\r\n");
        assert_eq!(c.read_value().unwrap(), Value::Bulk(b"abcde".to_vec()));
        assert_eq!(c.read_reply().unwrap(), b"*2\r\n:1\r\n:2\r\n");
        assert_eq!(c.read_exact(2).unwrap(), b"xy");
        assert_eq!(c.read_until_close(Duration::from_secs(5)), (b"z".to_vec(), true));
    }

    #[test]
    fn a_closed_connection_is_an_error_that_shows_the_unparsed_bytes() {
        let mut c = peer(&[b"$10\r\nshort"]);
        let err = c.read_reply().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert!(err.to_string().contains("$10\\r\\nshort"), "{err}");
    }
}
