//! A TCP relay on one current-thread tokio runtime: the floor of one extra loopback hop taken
//! through tokio (epoll, task wake-ups, its buffers) with no HTTP or MCP work at all.
//! `benches/gateways.sh` measures it beside socat (the kernel's floor) and the reference
//! gateway, so the gateway's added latency splits into the hop, the runtime and our work.
//!
//!   cargo run --release --example tokio_relay -- LISTEN-PORT UPSTREAM-PORT
//!
//! Binds 127.0.0.1 only.

use std::net::{Ipv4Addr, SocketAddr};

use tokio::net::{TcpListener, TcpStream};

fn main() -> std::io::Result<()> {
    let ports: Vec<u16> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()
        .map_err(|e| std::io::Error::other(format!("ports: {e}")))?;
    let [listen, upstream] = ports[..] else {
        eprintln!("usage: tokio_relay LISTEN-PORT UPSTREAM-PORT");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, listen)).await?;
        let to = SocketAddr::from((Ipv4Addr::LOCALHOST, upstream));
        loop {
            let (mut client, _) = listener.accept().await?;
            tokio::task::spawn_local(async move {
                let Ok(mut up) = TcpStream::connect(to).await else {
                    return;
                };
                let _ = (client.set_nodelay(true), up.set_nodelay(true));
                let _ = tokio::io::copy_bidirectional(&mut client, &mut up).await;
            });
        }
    })
}
