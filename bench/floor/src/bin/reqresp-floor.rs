//! The least any server can do for one request in flight: read a request, answer it, wait for
//! the next, with no data, no parsing beyond finding where each request ends, no persistence.
//! bench/floor.sh --reqresp runs it beside rill and Redis under redis-benchmark so the figures
//! say how far each server is from what its I/O mechanism alone costs, and which mechanism
//! costs least per request:
//!
//! * `--io epoll`: one thread, one epoll loop (mio): `epoll_wait`, then per ready client a
//!   `read` and a `write`, as Redis does.
//! * `--io tokio`: rill's mechanism: tokio's runtime (one worker per CPU the process may use),
//!   a task per client that tries a read, waits for readiness when there is nothing, writes
//!   the replies with `try_write`. `--io tokio-ct`: the same on tokio's one-thread runtime.
//! * `--io uring`: one thread, one io_uring: a receive kept submitted per client, its
//!   completion answered with a send, and every client's sends and receives of one loop turn
//!   submitted with one `io_uring_enter` that also waits for the next completion.
//! * `--io uring-multi`: the same with one multishot receive per client into buffers the
//!   kernel picks from a ring the server provides (no receive resubmitted per request).
//!
//! Replies: `+PONG` to PING, `+OK` to SET, a 3-byte bulk string to GET, an empty array to
//! anything else (redis-benchmark's CONFIG GET at start). Not a Redis server.
//!
//!     reqresp-floor --port PORT --io epoll|tokio|uring   (listens on 127.0.0.1 only)

use std::io::{ErrorKind, Read, Write};

/// Where the first complete request in `buf` ends, and its reply, if there is one.
fn request(buf: &[u8]) -> Option<(usize, &'static [u8])> {
    fn line(buf: &[u8], at: usize) -> Option<usize> {
        Some(at + buf.get(at..)?.windows(2).position(|w| w == b"\r\n")?)
    }
    fn number(buf: &[u8], at: usize) -> Option<(usize, usize)> {
        let end = line(buf, at)?;
        Some((std::str::from_utf8(buf.get(at..end)?).ok()?.parse().ok()?, end + 2))
    }
    let reply = |name: &[u8]| -> &'static [u8] {
        match name.to_ascii_uppercase().as_slice() {
            b"PING" => b"+PONG\r\n",
            b"SET" => b"+OK\r\n",
            b"GET" => b"$3\r\nxxx\r\n",
            _ => b"*0\r\n",
        }
    };
    if buf.first() != Some(&b'*') {
        // An inline command: one line.
        let end = line(buf, 0)?;
        let name = buf[..end].split(|&b| b == b' ').next().unwrap_or_default();
        return Some((end + 2, reply(name)));
    }
    let (n, mut at) = number(buf, 1)?;
    let mut name: &[u8] = b"";
    for i in 0..n {
        let (len, start) = number(buf, at + 1)?;
        let end = start + len;
        if end + 2 > buf.len() {
            return None;
        }
        if i == 0 {
            name = &buf[start..end];
        }
        at = end + 2;
    }
    Some((at, reply(name)))
}

/// Answers every complete request at the start of `input` into `out`; returns the bytes used.
fn answer(input: &[u8], out: &mut Vec<u8>) -> usize {
    let mut used = 0;
    while let Some((n, reply)) = request(&input[used..]) {
        used += n;
        out.extend_from_slice(reply);
    }
    used
}

fn main() {
    let arg = |name: &str| std::env::args().skip_while(|a| a != name).nth(1);
    let port: u16 = arg("--port").and_then(|p| p.parse().ok()).unwrap_or_else(|| {
        eprintln!("usage: reqresp-floor --port PORT --io epoll|tokio|uring");
        std::process::exit(2)
    });
    match arg("--io").as_deref().unwrap_or("epoll") {
        "epoll" => epoll(port),
        "tokio" => tokio_floor(port, tokio::runtime::Builder::new_multi_thread()),
        "tokio-ct" => tokio_floor(port, tokio::runtime::Builder::new_current_thread()),
        "uring" => uring(port, false),
        "uring-multi" => uring(port, true),
        other => {
            eprintln!("unknown --io {other}");
            std::process::exit(2)
        }
    }
}

fn epoll(port: u16) {
    use mio::net::{TcpListener, TcpStream};
    use mio::{Events, Interest, Poll, Token};
    use std::collections::HashMap;
    const LISTENER: Token = Token(0);
    let mut poll = Poll::new().expect("epoll");
    let mut listener = TcpListener::bind(([127, 0, 0, 1], port).into()).expect("bind");
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE).expect("register");
    let mut conns: HashMap<Token, (TcpStream, Vec<u8>)> = HashMap::new();
    let mut next = 1;
    let mut events = Events::with_capacity(1024);
    let mut chunk = vec![0u8; 16 * 1024];
    let mut out = Vec::new();
    loop {
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            panic!("epoll_wait: {e}");
        }
        for ev in events.iter() {
            if ev.token() == LISTENER {
                while let Ok((mut socket, _)) = listener.accept() {
                    let _ = socket.set_nodelay(true);
                    let token = Token(next);
                    next += 1;
                    poll.registry().register(&mut socket, token, Interest::READABLE).expect("register");
                    conns.insert(token, (socket, Vec::new()));
                }
                continue;
            }
            let token = ev.token();
            let Some((socket, input)) = conns.get_mut(&token) else { continue };
            let mut open = true;
            loop {
                match socket.read(&mut chunk) {
                    Ok(0) => open = false,
                    Ok(n) => {
                        input.extend_from_slice(&chunk[..n]);
                        if n == chunk.len() {
                            continue;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(_) => open = false,
                }
                break;
            }
            out.clear();
            let used = answer(input, &mut out);
            input.drain(..used);
            if !open || (!out.is_empty() && socket.write_all(&out).is_err()) {
                conns.remove(&token);
            }
        }
    }
}

fn tokio_floor(port: u16, mut builder: tokio::runtime::Builder) {
    let runtime = builder.enable_all().build().expect("runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
        loop {
            let Ok((socket, _)) = listener.accept().await else { continue };
            let _ = socket.set_nodelay(true);
            tokio::spawn(async move {
                let mut input: Vec<u8> = Vec::new();
                let mut chunk = vec![0u8; 16 * 1024];
                let mut out = Vec::new();
                loop {
                    // Try first, wait for readiness only when there is nothing (rill's driver
                    // does the same).
                    match socket.try_read(&mut chunk) {
                        Ok(0) => return,
                        Ok(n) => input.extend_from_slice(&chunk[..n]),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            if socket.readable().await.is_err() {
                                return;
                            }
                            continue;
                        }
                        Err(_) => return,
                    }
                    out.clear();
                    let used = answer(&input, &mut out);
                    input.drain(..used);
                    let mut at = 0;
                    while at < out.len() {
                        match socket.try_write(&out[at..]) {
                            Ok(n) => at += n,
                            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                                if socket.writable().await.is_err() {
                                    return;
                                }
                            }
                            Err(_) => return,
                        }
                    }
                }
            });
        }
    });
}

fn uring(port: u16, multishot: bool) {
    use io_uring::{cqueue, opcode, types, IoUring};
    use std::os::fd::AsRawFd;

    /// A client: its socket, a buffer a receive fills, what it has not parsed, its replies
    /// in flight.
    struct Conn {
        socket: std::net::TcpStream,
        chunk: Vec<u8>,
        input: Vec<u8>,
        out: Vec<u8>,
        /// Replies made while `out` is being sent (the kernel reads `out` until then).
        later: Vec<u8>,
        sending: bool,
    }
    const ACCEPT: u64 = u64::MAX;
    const RECV: u64 = 0;
    const SEND: u64 = 1;
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind");
    let mut ring = IoUring::builder()
        .setup_single_issuer()
        .setup_coop_taskrun()
        .setup_defer_taskrun()
        .build(4096)
        .expect("io_uring");
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let provided = multishot.then(|| Provided::register(&ring));
    let recv = |fd: types::Fd, conn: &mut Conn, slot: usize| match &provided {
        Some(_) => opcode::RecvMulti::new(fd, Provided::GROUP).build().user_data((slot as u64) << 1 | RECV),
        None => opcode::Recv::new(fd, conn.chunk.as_mut_ptr(), conn.chunk.len() as u32)
            .build()
            .user_data((slot as u64) << 1 | RECV),
    };
    let accept = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd())).build().user_data(ACCEPT);
    // SAFETY: the entry refers to no memory.
    unsafe { ring.submission().push(&accept).expect("queue") };
    let mut pending: Vec<io_uring::squeue::Entry> = Vec::new();
    loop {
        {
            let mut sq = ring.submission();
            for e in pending.drain(..) {
                // SAFETY: each entry points into a `Conn`'s buffer, which is neither moved
                // (it lives in a Box'd Vec that is not resized while in flight: `chunk` and
                // `out` are only touched after their completion) nor dropped before it.
                unsafe { sq.push(&e).expect("submission queue full") };
            }
        }
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc_eintr()) => continue,
            Err(e) => panic!("io_uring_enter: {e}"),
        }
        let done: Vec<(u64, i32, u32)> =
            ring.completion().map(|c: cqueue::Entry| (c.user_data(), c.result(), c.flags())).collect();
        for (data, res, flags) in done {
            if data == ACCEPT {
                if !cqueue::more(flags) {
                    pending.push(opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd())).build().user_data(ACCEPT));
                }
                if res < 0 {
                    continue;
                }
                use std::os::fd::FromRawFd;
                // SAFETY: the kernel handed us this new descriptor; we own it from here.
                let socket = unsafe { std::net::TcpStream::from_raw_fd(res) };
                let _ = socket.set_nodelay(true);
                let slot = conns.iter().position(Option::is_none).unwrap_or_else(|| {
                    conns.push(None);
                    conns.len() - 1
                });
                let mut conn = Conn {
                    socket,
                    chunk: vec![0; 16 * 1024],
                    input: Vec::new(),
                    out: Vec::new(),
                    later: Vec::new(),
                    sending: false,
                };
                pending.push(recv(types::Fd(conn.socket.as_raw_fd()), &mut conn, slot));
                conns[slot] = Some(conn);
                continue;
            }
            let slot = (data >> 1) as usize;
            let Some(conn) = conns.get_mut(slot).and_then(Option::as_mut) else { continue };
            if data & 1 == RECV {
                if res <= 0 {
                    // Closed (or failed): a send still in flight keeps the slot until it ends.
                    if !conn.sending {
                        conns[slot] = None;
                    } else {
                        conn.input.clear();
                        conn.chunk.clear();
                    }
                    continue;
                }
                let n = res as usize;
                match &provided {
                    Some(p) => {
                        let bid = cqueue::buffer_select(flags).expect("a provided buffer");
                        conn.input.extend_from_slice(p.take(bid, n));
                        p.give_back(bid);
                    }
                    None => conn.input.extend_from_slice(&conn.chunk[..n]),
                }
                let target = if conn.sending { &mut conn.later } else { &mut conn.out };
                let used = answer(&conn.input, target);
                conn.input.drain(..used);
                let fd = types::Fd(conn.socket.as_raw_fd());
                if !conn.sending && !conn.out.is_empty() {
                    conn.sending = true;
                    pending.push(
                        opcode::Send::new(fd, conn.out.as_ptr(), conn.out.len() as u32)
                            .build()
                            .user_data((slot as u64) << 1 | SEND),
                    );
                }
                if provided.is_none() || !cqueue::more(flags) {
                    pending.push(recv(fd, conn, slot));
                }
            } else {
                conn.sending = false;
                if res < 0 || conn.chunk.is_empty() {
                    conns[slot] = None;
                    continue;
                }
                conn.out.drain(..res as usize);
                if conn.out.is_empty() {
                    std::mem::swap(&mut conn.out, &mut conn.later);
                }
                if !conn.out.is_empty() {
                    conn.sending = true;
                    let fd = types::Fd(conn.socket.as_raw_fd());
                    pending.push(
                        opcode::Send::new(fd, conn.out.as_ptr(), conn.out.len() as u32)
                            .build()
                            .user_data((slot as u64) << 1 | SEND),
                    );
                }
            }
        }
    }
}

/// Receive buffers the kernel picks from (a provided-buffer ring, io_uring_register_buf_ring(3)).
struct Provided {
    ring: *mut io_uring::types::BufRingEntry,
    buffers: Vec<u8>,
    tail: std::cell::Cell<u16>,
}

impl Provided {
    const GROUP: u16 = 0;
    const COUNT: u16 = 1024;
    const SIZE: usize = 4096;

    fn register(uring: &io_uring::IoUring) -> Provided {
        let layout = std::alloc::Layout::from_size_align(Self::COUNT as usize * 16, 4096).expect("layout");
        // SAFETY: a non-zero size; the memory is never freed (the floor runs until killed).
        let ring = unsafe { std::alloc::alloc_zeroed(layout) } as *mut io_uring::types::BufRingEntry;
        let p = Provided { ring, buffers: vec![0; Self::COUNT as usize * Self::SIZE], tail: std::cell::Cell::new(0) };
        for bid in 0..Self::COUNT {
            p.give_back(bid);
        }
        // SAFETY: the ring stays valid for the process' life.
        unsafe { uring.submitter().register_buf_ring_with_flags(ring as u64, Self::COUNT, Self::GROUP, 0) }
            .expect("register_buf_ring");
        p
    }

    fn take(&self, bid: u16, n: usize) -> &[u8] {
        &self.buffers[bid as usize * Self::SIZE..][..n]
    }

    /// Hands buffer `bid` back to the kernel.
    fn give_back(&self, bid: u16) {
        let tail = self.tail.get();
        // SAFETY: the index is masked into the ring; the kernel reads an entry only once the
        // tail, published below with release ordering, covers it.
        unsafe {
            let entry = &mut *self.ring.add((tail & (Self::COUNT - 1)) as usize);
            entry.set_addr(self.buffers.as_ptr().add(bid as usize * Self::SIZE) as u64);
            entry.set_len(Self::SIZE as u32);
            entry.set_bid(bid);
            let tail_ptr = io_uring::types::BufRingEntry::tail(self.ring) as *const std::sync::atomic::AtomicU16;
            (*tail_ptr).store(tail.wrapping_add(1), std::sync::atomic::Ordering::Release);
        }
        self.tail.set(tail.wrapping_add(1));
    }
}

fn libc_eintr() -> i32 {
    4
}
