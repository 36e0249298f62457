//! The shared accept loop, tested directly.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use mock_backend::accept::serve_connections_with_grace;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::oneshot,
};

use crate::support::HANG_GUARD;

#[tokio::test]
async fn sets_nodelay_and_notifies_connections_of_shutdown() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let observed = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&observed);
    let server = tokio::spawn(serve_connections_with_grace(
        listener,
        async {
            let _ = stop_rx.await;
        },
        HANG_GUARD,
        move |mut stream, _peer, mut shutdown| {
            let seen = Arc::clone(&seen);
            async move {
                let nodelay = stream.nodelay().unwrap_or(false);
                let _ = stream.write_all(if nodelay { b"Y" } else { b"N" }).await;
                shutdown.triggered().await;
                assert!(shutdown.is_triggered());
                seen.fetch_add(1, Ordering::SeqCst);
            }
        },
    ));

    let mut clients = Vec::new();
    for _ in 0..3 {
        let mut client = TcpStream::connect(addr).await.expect("connect");
        let mut byte = [0u8; 1];
        client.read_exact(&mut byte).await.expect("read");
        assert_eq!(&byte, b"Y", "TCP_NODELAY set on accepted socket");
        clients.push(client);
    }
    let _ = stop_tx.send(());
    tokio::time::timeout(HANG_GUARD, server)
        .await
        .expect("loop returned")
        .expect("no panic");
    // Every connection saw shutdown and finished within the grace period.
    assert_eq!(observed.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn grace_period_bounds_connections_that_ignore_shutdown() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (accepted_tx, mut accepted_rx) = tokio::sync::mpsc::unbounded_channel();
    let server = tokio::spawn(serve_connections_with_grace(
        listener,
        async {
            let _ = stop_rx.await;
        },
        Duration::from_millis(100),
        move |stream, _peer, _shutdown| {
            let _ = accepted_tx.send(());
            async move {
                // Holds the connection forever, ignoring shutdown.
                let _stream = stream;
                std::future::pending::<()>().await;
            }
        },
    ));
    let mut client = TcpStream::connect(addr).await.expect("connect");
    accepted_rx.recv().await.expect("accepted");
    let _ = stop_tx.send(());
    tokio::time::timeout(HANG_GUARD, server)
        .await
        .expect("loop returned despite a stuck connection")
        .expect("no panic");
    // The stuck connection was aborted, which closes the socket.
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(HANG_GUARD, client.read(&mut buf))
        .await
        .expect("socket closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}
