//! The byte streams a connection is served over, and what each one can do.
//!
//! A [`Transport`] is what the driver (`driver.rs`) reads requests from and writes replies to,
//! in the readiness style tokio's sockets have: try an operation without waiting, and wait
//! for readiness only when it would block. That keeps the plain TCP path exactly the system
//! calls it always made (a `read` attempted before any timer is armed, a `write` attempted
//! before any readiness is awaited).
//!
//! Direct delivery is a capability, not an assumption: [`Transport::direct`] hands out a
//! [`DirectWrite`] when another connection's task may write a reply into this client's
//! stream while the client's own task is parked reading it. A TCP socket can (its write half
//! is shared, and a `writev(2)` of a whole reply is atomic enough for a client that has
//! nothing else pending, which is when `blocking.rs` uses it). A TLS stream cannot: its
//! writes go through a session only its owner may touch, so it offers none, and a served
//! client's reply travels to its task over the waiter's channel instead ([`Stream`] stands
//! for every such transport).
//!
//! Writes are vectored: the output holds large payloads by reference
//! (`rill_resp::OutputBuffer`), so a write hands over the encoded bytes and the payloads
//! between them as slices. One slice (the common case: small replies, all encoded) is written
//! with a plain `write(2)`.
//!
//! | transport | reads | writes | direct delivery |
//! | --- | --- | --- | --- |
//! | [`Tcp`] | `try_read` on the read half | `try_write` (one slice) or `try_write_vectored` on the shared write half | yes: the write half |
//! | [`Stream`] over any `AsyncRead + AsyncWrite` | `poll_read` into a staging buffer | `poll_write_vectored`, then `poll_flush` | no |

use bytes::BytesMut;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Bytes a [`Stream`] reads at most per call.
const STREAM_READ_CHUNK_BYTES: usize = 16 * 1024;

/// A way for another connection's task to write a reply straight into this client's stream.
pub trait DirectWrite: Send + Sync + std::fmt::Debug {
    /// Write what the stream takes now of `bufs`, in order, without waiting (`WouldBlock`
    /// when it takes nothing).
    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
}

impl DirectWrite for OwnedWriteHalf {
    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match bufs {
            // The common case, as the plain write it always was.
            [one] => OwnedWriteHalf::try_write(self, one),
            _ => OwnedWriteHalf::try_write_vectored(self, bufs),
        }
    }
}

/// A client's byte stream, as the driver uses it. Reads and writes are never in progress at
/// the same time on one transport (the driver does one thing at a time); a [`DirectWrite`]
/// handed out may write concurrently with a read.
pub trait Transport: Send + 'static {
    /// Whether written bytes may sit in the transport until [`Transport::poll_flush`] (a TLS
    /// session does; a socket does not, and then the driver never flushes).
    const BUFFERS_WRITES: bool;

    /// Append what has arrived to `buf` without waiting: the byte count, `Ok(0)` when the peer
    /// closed, `WouldBlock` when nothing is there.
    fn try_read(&mut self, buf: &mut BytesMut) -> io::Result<usize>;

    /// Ready when a read may make progress (data, end of stream or an error).
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Write what the transport takes now of `bufs`, in order, without waiting
    /// (`WouldBlock` when it takes nothing).
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;

    /// Write some of `bufs`, waiting until the transport takes something.
    fn poll_write_vectored(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>>;

    /// Push out what the transport buffered (only called when it [`BUFFERS_WRITES`]).
    ///
    /// [`BUFFERS_WRITES`]: Transport::BUFFERS_WRITES
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// A handle for direct delivery, if this transport allows it (see the module
    /// documentation).
    fn direct(&self) -> Option<Arc<dyn DirectWrite>>;
}

// ------------------------------------------------------------------------------------------------
// TCP
// ------------------------------------------------------------------------------------------------

/// A TCP connection (`TCP_NODELAY` set), split so that its write half can be shared for
/// direct delivery.
#[derive(Debug)]
pub struct Tcp {
    read: OwnedReadHalf,
    write: Arc<OwnedWriteHalf>,
}

impl Tcp {
    /// Take over an accepted socket.
    pub fn new(socket: TcpStream) -> Tcp {
        // Replies are written whole, one write per batch: Nagle would only delay them.
        let _ = socket.set_nodelay(true);
        let (read, write) = socket.into_split();
        Tcp { read, write: Arc::new(write) }
    }
}

impl Transport for Tcp {
    const BUFFERS_WRITES: bool = false;

    fn try_read(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        // A read that leaves room drained the socket (epoll is edge-triggered): its readiness is
        // cleared, as tokio's own `poll_read` does, so that the next `try_read` makes no `recv`
        // that can only fail (one per request of a client waiting for its reply, and per batch
        // of a pipelining one). The read runs inside `try_io`, which clears the readiness event
        // seen before the read: bytes arriving after it come with a new event, never lost.
        let room = buf.capacity() - buf.len();
        let mut drained = 0;
        let read = &self.read;
        let outcome = AsRef::<TcpStream>::as_ref(read).try_io(tokio::io::Interest::READABLE, || {
            let n = read.try_read_buf(buf)?;
            if n > 0 && n < room {
                drained = n;
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(n)
        });
        match outcome {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && drained > 0 => Ok(drained),
            other => other,
        }
    }

    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        AsRef::<TcpStream>::as_ref(&self.read).poll_read_ready(cx)
    }

    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        DirectWrite::try_write_vectored(&*self.write, bufs)
    }

    fn poll_write_vectored(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        loop {
            match AsRef::<TcpStream>::as_ref(&*self.write).poll_write_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
            // A would-block clears the readiness, so the next poll waits for the socket.
            match DirectWrite::try_write_vectored(&*self.write, bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return Poll::Ready(r),
            }
        }
    }

    fn poll_flush(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn direct(&self) -> Option<Arc<dyn DirectWrite>> {
        Some(self.write.clone())
    }
}

// ------------------------------------------------------------------------------------------------
// Any AsyncRead + AsyncWrite
// ------------------------------------------------------------------------------------------------

/// Any tokio byte stream (a TLS stream, a Unix socket, an in-memory pipe): served through its
/// owner task only, so without direct delivery.
///
/// Readiness is emulated with a staging buffer: waiting for input reads into it, and
/// [`Transport::try_read`] hands its bytes over (one copy, which a TLS stream's decryption
/// dwarfs). The `try_` operations poll once with a no-op waker; the driver always polls again
/// with its own waker before it sleeps.
#[derive(Debug)]
pub struct Stream<S> {
    io: S,
    /// Where waiting for input reads to (allocated, zeroed, on the first read).
    staging: Box<[u8]>,
    /// The bytes of `staging` read and not yet handed over.
    staged: std::ops::Range<usize>,
    /// The peer closed (once `staged` is handed over, reads return 0).
    closed: bool,
}

impl<S> Stream<S> {
    /// Wrap `io`.
    pub fn new(io: S) -> Stream<S> {
        Stream { io, staging: Box::default(), staged: 0..0, closed: false }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Stream<S> {
    /// Read into `staging` unless it still holds something or the peer closed.
    fn poll_stage(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.staged.is_empty() || self.closed {
            return Poll::Ready(Ok(()));
        }
        if self.staging.is_empty() {
            // Zeroed: `ReadBuf` over initialised bytes needs no `unsafe`.
            self.staging = vec![0; STREAM_READ_CHUNK_BYTES].into_boxed_slice();
        }
        let mut rb = ReadBuf::new(&mut self.staging);
        let polled = Pin::new(&mut self.io).poll_read(cx, &mut rb);
        let n = rb.filled().len();
        self.staged = 0..n;
        match polled {
            Poll::Ready(Ok(())) => {
                self.closed = n == 0;
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Transport for Stream<S> {
    const BUFFERS_WRITES: bool = true;

    fn try_read(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        let mut cx = Context::from_waker(Waker::noop());
        match self.poll_stage(&mut cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => return Err(io::ErrorKind::WouldBlock.into()),
        }
        let staged = self.staging.get(self.staged.clone()).unwrap_or_default();
        buf.extend_from_slice(staged);
        self.staged = 0..0;
        Ok(staged.len())
    }

    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_stage(cx)
    }

    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut cx = Context::from_waker(Waker::noop());
        match self.poll_write_vectored(&mut cx, bufs) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn poll_write_vectored(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        // A stream without vectored writes of its own writes the first slice: the driver
        // comes back for the rest.
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn direct(&self) -> Option<Arc<dyn DirectWrite>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_stream_reads_what_arrived_and_reports_the_peer_closing() {
        let (ours, mut peer) = tokio::io::duplex(64);
        let mut t = Stream::new(ours);
        let mut buf = BytesMut::new();
        assert_eq!(t.try_read(&mut buf).map_err(|e| e.kind()), Err(io::ErrorKind::WouldBlock));
        peer.write_all(b"PING\r\n").await.unwrap_or_else(|e| panic!("{e}"));
        std::future::poll_fn(|cx| t.poll_read_ready(cx)).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.try_read(&mut buf).ok(), Some(6));
        assert_eq!(&buf[..], b"PING\r\n");
        drop(peer);
        assert_eq!(t.try_read(&mut buf).ok(), Some(0), "end of stream");
        assert!(t.direct().is_none(), "no direct delivery through a stream");
    }

    #[tokio::test]
    async fn a_stream_write_that_would_block_says_so_and_waits_for_room() {
        let (ours, mut peer) = tokio::io::duplex(8);
        let mut t = Stream::new(ours);
        let slices = |b: &'static [u8]| [IoSlice::new(b)];
        assert_eq!(t.try_write_vectored(&slices(b"0123456789")).ok(), Some(8), "the pipe takes what fits");
        assert_eq!(t.try_write_vectored(&slices(b"89")).map_err(|e| e.kind()), Err(io::ErrorKind::WouldBlock));
        let mut got = [0u8; 8];
        peer.read_exact(&mut got).await.unwrap_or_else(|e| panic!("{e}"));
        let n = std::future::poll_fn(|cx| t.poll_write_vectored(cx, &slices(b"89"))).await.ok();
        assert_eq!(n, Some(2));
    }
}
