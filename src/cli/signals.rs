//! Signals for the commands: SIGINT, SIGTERM and SIGHUP caught and turned into a run's
//! [`driver::Interrupt`] or a server's shutdown; and the open-file limit raised before any
//! command starts.

use crate::driver;
use crate::ui::Display;

/// Raises the soft open-file limit to the hard limit (a descriptor per connection: the usual
/// soft limit, 1024, is far below what load needs); gives the soft limit found at start.
pub(super) fn raise_open_files() -> u64 {
    let (before, after) = driver::limits::raise_open_files();
    if after > before {
        tracing::debug!(before, after, "open-file limit raised to the hard limit");
    }
    before
}

/// SIGINT, SIGTERM and SIGHUP stop the run: the first lets requests in flight drain for the
/// grace, the second cancels them at once (results are written either way), a third exits at
/// once with 130. (On the dashboard the terminal is in raw mode: Ctrl-C arrives as a key, and
/// `kill -INT` as a signal.)
pub(super) fn watch_signals(interrupt: driver::Interrupt, display: Display) {
    let quiet = matches!(display, Display::Dashboard { .. });
    // Caught from here on (not from when the thread gets to run).
    let Some((rt, mut signals)) = Signals::caught() else {
        return;
    };
    let _ = std::thread::Builder::new().name("mcpbench-signals".into()).spawn(move || {
        rt.block_on(async {
            for n in 0.. {
                let Some(name) = signals.next().await else { return };
                match n {
                    0 => {
                        if !quiet {
                            eprintln!("\n{name}: no new requests, draining those in flight, then writing the results (again to cancel them)");
                        }
                        interrupt.request(name);
                    }
                    1 => {
                        if !quiet {
                            eprintln!("{name}: cancelling the requests in flight, writing the results (again to quit at once)");
                        }
                        interrupt.request(name);
                    }
                    _ => {
                        crate::ui::restore_terminal();
                        std::process::exit(130);
                    }
                }
            }
        });
    });
}

/// Completes on SIGINT, SIGTERM or SIGHUP. Nothing is registered until it is first polled,
/// so it can be made outside a runtime.
pub(super) async fn signalled() {
    Signals::new().next().await;
}

/// SIGINT, SIGTERM and SIGHUP (Ctrl-C where there are no Unix signals), caught from creation
/// on: registering replaces their default action (termination) for good.
pub(super) struct Signals {
    #[cfg(unix)]
    streams: Option<[tokio::signal::unix::Signal; 3]>,
}

impl Signals {
    /// A runtime to await them on, and the signals caught from now on.
    pub(super) fn caught() -> Option<(tokio::runtime::Runtime, Signals)> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        let signals = {
            let _in = rt.enter();
            Signals::new()
        };
        Some((rt, signals))
    }

    /// Must be called inside a runtime with signals enabled.
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let streams = match (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) {
                (Ok(int), Ok(term), Ok(hup)) => Some([int, term, hup]),
                _ => None,
            };
            Signals { streams }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// The next signal, by name; `None` if none can be awaited.
    pub(super) async fn next(&mut self) -> Option<&'static str> {
        #[cfg(unix)]
        if let Some([int, term, hup]) = &mut self.streams {
            return tokio::select! {
                _ = int.recv() => Some("SIGINT"),
                _ = term.recv() => Some("SIGTERM"),
                _ = hup.recv() => Some("SIGHUP"),
            };
        }
        tokio::signal::ctrl_c().await.ok().map(|()| "Ctrl-C")
    }
}
