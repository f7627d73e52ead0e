//! Free loopback ports.

use std::net::TcpListener;

/// A port on 127.0.0.1 that was free a moment ago. Whoever binds it next may lose a race with
/// another process; [`crate::Server`] retries on another port when that happens.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("cannot bind 127.0.0.1:0: {e}"));
    listener.local_addr().unwrap_or_else(|e| panic!("local_addr: {e}")).port()
}

/// Offset of a Redis Cluster node's bus port from its client port.
pub const CLUSTER_BUS_OFFSET: u16 = 10_000;

/// A free port whose cluster bus port (port + 10000) is free as well.
pub fn free_port_with_bus() -> u16 {
    loop {
        let port = free_port();
        if let Some(bus) = port.checked_add(CLUSTER_BUS_OFFSET) {
            if TcpListener::bind(("127.0.0.1", bus)).is_ok() {
                return port;
            }
        }
    }
}
