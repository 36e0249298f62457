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

#[tokio::test]
async fn connections_beyond_the_limit_get_the_refusal_and_are_closed() {
    use mock_backend::accept::{Admission, Connections, serve_connections_limited};

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let connections = Connections::new(1);
    let admission = Admission {
        connections: Arc::clone(&connections),
        refusal: Some(bytes::Bytes::from_static(b"FULL")),
        local: false,
    };
    let server = tokio::spawn(serve_connections_limited(
        listener,
        async {
            let _ = stop_rx.await;
        },
        HANG_GUARD,
        admission,
        |mut stream, _peer, _shutdown, slot| async move {
            // Holds its place until the client closes.
            let _slot = slot;
            let _ = stream.write_all(b"OK").await;
            let mut buf = [0u8; 1];
            let _ = stream.read(&mut buf).await;
        },
    ));
    let greeting = |mut c: TcpStream| async move {
        let mut got = Vec::new();
        let _ = tokio::time::timeout(HANG_GUARD, c.read_to_end(&mut got)).await;
        got
    };
    let mut first = TcpStream::connect(addr).await.expect("connect");
    let mut ok = [0u8; 2];
    first.read_exact(&mut ok).await.expect("served");
    assert_eq!(&ok, b"OK");
    assert_eq!(connections.open(), 1);
    let second = TcpStream::connect(addr).await.expect("connect");
    assert_eq!(greeting(second).await, b"FULL", "refused, then closed");
    assert_eq!(connections.open(), 1, "a refusal takes no place");
    drop(first);
    let start = tokio::time::Instant::now();
    while connections.open() != 0 {
        assert!(start.elapsed() < HANG_GUARD, "the place was never freed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut third = TcpStream::connect(addr).await.expect("connect");
    third.read_exact(&mut ok).await.expect("served again");
    assert_eq!(&ok, b"OK");
    drop(third);
    let _ = stop_tx.send(());
    tokio::time::timeout(HANG_GUARD, server)
        .await
        .expect("loop returned")
        .expect("no panic");
}
