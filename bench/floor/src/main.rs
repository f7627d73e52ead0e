//! The least any server can do on the shared loadgen's `fanout` path: one thread, one epoll
//! loop (mio), no data structures beyond a queue of undelivered entries per group, no
//! persistence, no checks. It parks `XREADGROUP ... BLOCK` until the next `XADD`, writes every
//! parked reader its entries before the writer's reply (as Redis and rill do), and answers
//! XACK, XGROUP, DEL and PING with canned replies. It is not a Redis server: it understands
//! exactly the commands `loadgen fanout` sends and nothing else. bench/floor.sh runs it beside
//! rill and Redis to show how much of the measured latency a server's own work can still save.
//!
//!     fanout-floor --port PORT   (listens on 127.0.0.1 only)

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};

const LISTENER: Token = Token(0);

struct Conn {
    socket: TcpStream,
    input: Vec<u8>,
    /// The group of this connection's parked XREADGROUP, if it is parked.
    parked: Option<Vec<u8>>,
}

/// One complete RESP array of bulk strings at the start of `buf`, and the bytes it used.
fn parse(buf: &[u8]) -> Option<(Vec<Vec<u8>>, usize)> {
    fn number(buf: &[u8], at: usize) -> Option<(usize, usize)> {
        let end = at + buf.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        Some((std::str::from_utf8(&buf[at..end]).ok()?.parse().ok()?, end + 2))
    }
    if buf.first() != Some(&b'*') {
        return None;
    }
    let (n, mut at) = number(buf, 1)?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        let (len, start) = number(buf, at + 1)?;
        let end = start + len;
        if end + 2 > buf.len() {
            return None;
        }
        args.push(buf[start..end].to_vec());
        at = end + 2;
    }
    Some((args, at))
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// An XREADGROUP reply for stream `key` holding `entries` (each already encoded).
fn read_reply(out: &mut Vec<u8>, key: &[u8], entries: &mut Vec<Vec<u8>>) {
    out.extend_from_slice(b"*1\r\n*2\r\n");
    bulk(out, key);
    out.extend_from_slice(format!("*{}\r\n", entries.len()).as_bytes());
    for e in entries.drain(..) {
        out.extend_from_slice(&e);
    }
}

fn main() {
    let port: u16 = std::env::args()
        .skip_while(|a| a != "--port")
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| {
            eprintln!("usage: fanout-floor --port PORT");
            std::process::exit(2)
        });
    let mut poll = Poll::new().expect("epoll");
    let mut listener = TcpListener::bind(([127, 0, 0, 1], port).into()).expect("bind");
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE).expect("register");
    let mut conns: HashMap<Token, Conn> = HashMap::new();
    let mut next = 1;
    let mut seq = 0u64;
    // Per group, the entries added since its reader last read.
    let mut queues: HashMap<Vec<u8>, Vec<Vec<u8>>> = HashMap::new();
    let mut events = Events::with_capacity(256);
    let mut chunk = vec![0u8; 16 * 1024];
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
                    conns.insert(token, Conn { socket, input: Vec::new(), parked: None });
                }
                continue;
            }
            let token = ev.token();
            let Some(conn) = conns.get_mut(&token) else { continue };
            let mut open = true;
            loop {
                match conn.socket.read(&mut chunk) {
                    Ok(0) => open = false,
                    Ok(n) => {
                        conn.input.extend_from_slice(&chunk[..n]);
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(_) => open = false,
                }
                break;
            }
            let mut input = std::mem::take(&mut conn.input);
            let mut used = 0;
            let mut out = Vec::new();
            while let Some((args, n)) = parse(&input[used..]) {
                used += n;
                match args[0].to_ascii_uppercase().as_slice() {
                    // XREADGROUP GROUP g c COUNT n BLOCK ms STREAMS key >
                    b"XREADGROUP" if args.len() >= 3 => {
                        let queue = queues.entry(args[2].clone()).or_default();
                        if queue.is_empty() {
                            conns.get_mut(&token).expect("conn").parked = Some(args[2].clone());
                        } else {
                            read_reply(&mut out, &args[args.len() - 2], queue);
                        }
                    }
                    // XADD key * field value ...
                    b"XADD" if args.len() >= 3 => {
                        seq += 1;
                        let id = format!("{seq}-0");
                        let mut entry = b"*2\r\n".to_vec();
                        bulk(&mut entry, id.as_bytes());
                        entry.extend_from_slice(format!("*{}\r\n", args.len() - 3).as_bytes());
                        for a in &args[3..] {
                            bulk(&mut entry, a);
                        }
                        for q in queues.values_mut() {
                            q.push(entry.clone());
                        }
                        for c in conns.values_mut() {
                            if let Some(group) = c.parked.take() {
                                let mut reply = Vec::new();
                                read_reply(&mut reply, &args[1], queues.get_mut(&group).expect("group"));
                                let _ = c.socket.write_all(&reply);
                            }
                        }
                        bulk(&mut out, id.as_bytes());
                    }
                    b"XACK" => out.extend_from_slice(format!(":{}\r\n", args.len().saturating_sub(3)).as_bytes()),
                    // XGROUP CREATE key group id MKSTREAM
                    b"XGROUP" if args.len() >= 4 => {
                        queues.entry(args[3].clone()).or_default();
                        out.extend_from_slice(b"+OK\r\n");
                    }
                    b"DEL" => {
                        queues.clear();
                        out.extend_from_slice(b":1\r\n");
                    }
                    b"PING" => out.extend_from_slice(b"+PONG\r\n"),
                    _ => out.extend_from_slice(b"-ERR fanout-floor knows only what loadgen fanout sends\r\n"),
                }
            }
            input.drain(..used);
            let conn = conns.get_mut(&token).expect("conn");
            conn.input = input;
            // Replies are a few hundred bytes: a socket buffer too full for one ends the
            // connection rather than being waited for.
            if !open || (!out.is_empty() && conn.socket.write_all(&out).is_err()) {
                conns.remove(&token);
            }
        }
    }
}
