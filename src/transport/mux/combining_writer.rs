//! The combining writer of a multiplexed connection: the first caller to find it idle writes
//! everything pending, framed for the byte stream (lines for stdio, WebSocket frames).

use std::cell::RefCell;

use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Frames messages for a byte stream.
pub trait Framer {
    fn frame(&mut self, msg: &[u8], out: &mut Vec<u8>);
}

/// Newline-delimited JSON (stdio).
#[derive(Debug, Default)]
pub struct Lines;

impl Framer for Lines {
    fn frame(&mut self, msg: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(msg);
        out.push(b'\n');
    }
}

struct WriterState<W, F> {
    io: Option<W>,
    framer: F,
    pending: Vec<u8>,
    spare: Vec<u8>,
    broken: bool,
}

/// The combining writer (see the module docs).
pub struct Writer<W, F> {
    state: RefCell<WriterState<W, F>>,
}

impl<W, F> std::fmt::Debug for Writer<W, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Writer")
    }
}

impl<W: AsyncWrite + Unpin, F: Framer> Writer<W, F> {
    pub fn new(io: W, framer: F) -> Self {
        Writer {
            state: RefCell::new(WriterState {
                io: Some(io),
                framer,
                pending: Vec::with_capacity(4096),
                spare: Vec::with_capacity(4096),
                broken: false,
            }),
        }
    }

    /// Queues `msg` and makes sure it is written. If another caller's write is in progress,
    /// that caller writes this message too before it returns.
    pub async fn send(&self, msg: &[u8]) -> Result<(), ()> {
        {
            let mut st = self.state.borrow_mut();
            if st.broken {
                return Err(());
            }
            let WriterState {
                framer, pending, ..
            } = &mut *st;
            framer.frame(msg, pending);
        }
        self.flush_pending().await
    }

    /// Queues bytes that are already framed (e.g. a WebSocket pong) and writes them.
    pub async fn send_raw(&self, bytes: &[u8]) -> Result<(), ()> {
        {
            let mut st = self.state.borrow_mut();
            if st.broken {
                return Err(());
            }
            st.pending.extend_from_slice(bytes);
        }
        self.flush_pending().await
    }

    /// Applies `f` to the framer (e.g. to frame a control message with its state).
    pub fn with_framer<T>(&self, f: impl FnOnce(&mut F) -> T) -> T {
        f(&mut self.state.borrow_mut().framer)
    }

    async fn flush_pending(&self) -> Result<(), ()> {
        loop {
            let (mut io, mut buf) = {
                let mut st = self.state.borrow_mut();
                if st.pending.is_empty() {
                    return Ok(());
                }
                // Someone else is writing; they will write ours too before they return.
                let Some(io) = st.io.take() else {
                    return Ok(());
                };
                let spare = std::mem::take(&mut st.spare);
                (io, std::mem::replace(&mut st.pending, spare))
            };
            // If this future is dropped mid-write the stream is corrupt: mark it broken.
            struct Poison<'a, W, F>(&'a Writer<W, F>, bool);
            impl<W, F> Drop for Poison<'_, W, F> {
                fn drop(&mut self) {
                    if !self.1 {
                        self.0.state.borrow_mut().broken = true;
                    }
                }
            }
            let mut poison = Poison(self, false);
            let r = match io.write_all(&buf).await {
                Ok(()) => io.flush().await,
                Err(e) => Err(e),
            };
            poison.1 = true;
            buf.clear();
            let mut st = self.state.borrow_mut();
            st.io = Some(io);
            st.spare = buf;
            if r.is_err() {
                st.broken = true;
                return Err(());
            }
        }
    }

    /// Gives the stream back (to close it), if no write is in progress.
    pub fn take(&self) -> Option<W> {
        self.state.borrow_mut().io.take()
    }
}

/// Something that carries messages to the server.
pub trait Outbound {
    fn send_message(&self, msg: &[u8]) -> impl Future<Output = Result<(), ()>>;
    /// What the peer said outside the protocol, for a message once it broke off (a child
    /// process's exit status and the end of its standard error); `None`: nothing.
    fn aside(&self) -> impl Future<Output = Option<String>> {
        async { None }
    }
}

impl<W: AsyncWrite + Unpin, F: Framer> Outbound for Writer<W, F> {
    async fn send_message(&self, msg: &[u8]) -> Result<(), ()> {
        self.send(msg).await
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    #[tokio::test]
    async fn combining_writer_writes_everything_in_order() {
        let (client, mut server) = tokio::io::duplex(16);
        let w = Rc::new(Writer::new(client, Lines));
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async move {
                let mut tasks = Vec::new();
                for i in 0..20 {
                    let w = w.clone();
                    tasks.push(tokio::task::spawn_local(async move {
                        w.send(format!("m{i}").as_bytes()).await
                    }));
                }
                let reader = tokio::spawn(async move {
                    let mut all = Vec::new();
                    let mut buf = [0u8; 64];
                    while all.iter().filter(|&&b| b == b'\n').count() < 20 {
                        let n = tokio::io::AsyncReadExt::read(&mut server, &mut buf)
                            .await
                            .unwrap();
                        all.extend_from_slice(&buf[..n]);
                    }
                    all
                });
                for t in tasks {
                    t.await.unwrap().unwrap();
                }
                let all = reader.await.unwrap();
                let lines: std::collections::HashSet<&[u8]> = all
                    .split(|&b| b == b'\n')
                    .filter(|l| !l.is_empty())
                    .collect();
                assert_eq!(lines.len(), 20);
            })
            .await;
    }
}
