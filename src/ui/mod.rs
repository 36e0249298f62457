//! Watching a run: the live dashboard (ratatui over crossterm, on its own thread) or progress
//! lines on stderr (text or JSON). Both read the run's live view ([`Live`]), which the driver
//! publishes once per interval through a watch channel; nothing per request reaches them.
//!
//! `metrics` serves the same view to Prometheus scrapers (`--metrics-listen`).
//! `view` draws (pure functions of the view and the viewer's state, snapshot-tested),
//! `terminal` owns the terminal (raw mode, alternate screen) and restores it on every exit
//! path, panics included; `format` writes numbers the way people compare them.

pub mod format;
pub mod metrics_endpoint;
mod terminal;
pub mod view;

/// Gives the terminal back if the dashboard holds it (before an exit that skips destructors).
pub fn restore_terminal() {
    terminal::restore();
}

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossterm::event::{self, Event, KeyEventKind};
use tokio::sync::watch;

use crate::metrics::collector::IntervalSnapshot;
use crate::metrics::grid::Phase;
use crate::report::live::{Live, LiveSink};
use view::ViewState;

/// How a run is shown while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// The full-screen dashboard; at the end it stays until a key is pressed unless
    /// `exit_on_finish`.
    Dashboard { exit_on_finish: bool },
    /// One line per interval on stderr.
    Lines,
    /// One JSON object per interval on stderr (the fields of `timeseries.csv`).
    Json,
    /// Nothing until the final table.
    Quiet,
}

/// Frames per second at most: the view changes once per interval, keys and resizes redraw at
/// once.
const FRAME: Duration = Duration::from_millis(200);

/// A running display: give [`Watcher::sink`] to the run, then [`Watcher::finish`].
#[derive(Debug)]
pub struct Watcher {
    sink: Option<LiveSink>,
    thread: Option<JoinHandle<()>>,
    /// The viewer stopped the run from the dashboard (`q`, Esc, Ctrl-C as a key).
    stopped: Arc<AtomicBool>,
}

/// The display thread ended with a panic; the run itself went on.
#[derive(Debug, thiserror::Error)]
#[error("the dashboard stopped with an error (above); the run went on and its results are written")]
pub struct DisplayFailed;

impl Watcher {
    /// Starts the display, and the live `/metrics` endpoint on `metrics` if given. The
    /// dashboard turns `q`, Esc and Ctrl-C into a call of `interrupt` (once per key: the
    /// first stops the run, a second stops it at once).
    /// `requested` says whether a stop was asked for (a key, or a signal): a dashboard that
    /// waits for a key after the run ends stops waiting on one (SIGTERM, or SIGHUP when its
    /// terminal goes away).
    pub fn start(
        display: Display,
        (interrupt, requested): (
            impl Fn() + Send + 'static,
            impl Fn() -> bool + Send + 'static,
        ),
        metrics: Option<std::net::TcpListener>,
    ) -> std::io::Result<Watcher> {
        let stopped = Arc::new(AtomicBool::new(false));
        if display == Display::Quiet && metrics.is_none() {
            return Ok(Watcher {
                sink: None,
                thread: None,
                stopped,
            });
        }
        let (tx, rx) = watch::channel(None);
        if let Some(listener) = metrics {
            let rx = tx.subscribe();
            std::thread::Builder::new()
                .name("mcpbench-metrics".into())
                .spawn(move || metrics_endpoint::serve(listener, rx))?;
        }
        if display == Display::Quiet {
            return Ok(Watcher {
                sink: Some(Arc::new(tx)),
                thread: None,
                stopped,
            });
        }
        let by_viewer = stopped.clone();
        let thread = std::thread::Builder::new()
            .name("mcpbench-display".into())
            .spawn(move || match display {
                Display::Dashboard { exit_on_finish } => {
                    let stop = Stop {
                        interrupt: Box::new(interrupt),
                        requested: Box::new(requested),
                        by_viewer,
                    };
                    if let Err(e) = dashboard(rx, stop, exit_on_finish) {
                        eprintln!("dashboard: {e}");
                    }
                }
                Display::Json => lines(rx, |s| Some(s.json())),
                _ => lines(rx, progress_line),
            })?;
        Ok(Watcher {
            sink: Some(Arc::new(tx)),
            thread: Some(thread),
            stopped,
        })
    }

    /// The viewer stopped the run from the dashboard: a deliberate, shorter run.
    pub fn stopped_by_viewer(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Where the run publishes its live view (`None`: nobody watches).
    pub fn sink(&self) -> Option<LiveSink> {
        self.sink.clone()
    }

    /// Waits for the display to end: progress lines are all printed, the dashboard has shown
    /// the final result (until a key, unless `exit_on_finish`) and the terminal is restored.
    /// Every other holder of the sink must have dropped it.
    pub fn finish(&mut self) -> Result<(), DisplayFailed> {
        self.sink = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Err(_)) => Err(DisplayFailed),
            _ => Ok(()),
        }
    }
}

/// Prints one line per interval (every interval, in order) until the run's sink is dropped.
fn lines(
    mut rx: watch::Receiver<Option<Arc<Live>>>,
    line: fn(&IntervalSnapshot) -> Option<String>,
) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    // The first interval not yet printed, by index; a new run (find-max steps) starts again.
    let mut next = 0u64;
    let mut header: Option<Arc<crate::report::live::RunHeader>> = None;
    loop {
        let open = rt.block_on(rx.changed()).is_ok();
        if let Some(live) = rx.borrow_and_update().clone() {
            if !header
                .as_ref()
                .is_some_and(|h| Arc::ptr_eq(h, &live.header))
            {
                header = Some(live.header.clone());
                next = 0;
            }
            for s in &live.history {
                if s.index < next {
                    continue;
                }
                if let Some(l) = line(s) {
                    eprintln!("{l}");
                }
                next = s.index + 1;
            }
        }
        if !open {
            return;
        }
    }
}

/// One line per interval: warm-up, measured (ok/s as a whole number, p50, p95, p99, errors),
/// or the drain after the end. Quiet intervals after the run print nothing; a stalled target still shows, with
/// requests in flight.
pub fn progress_line(s: &IntervalSnapshot) -> Option<String> {
    let t = s.end.as_secs_f64();
    let secs = s.len().as_secs_f64().max(1e-3);
    if s.is_empty() {
        return None;
    }
    Some(match s.phase {
        Phase::Warmup => format!(
            "[{t:>6.1}s] {:>8.0} req/s  (warm-up, not measured)",
            s.warmup_ended as f64 / secs
        ),
        Phase::Measured => format!(
            "[{t:>6.1}s] {:>8.0} ok/s  p50 {:>8.3}ms  p95 {:>8.3}ms  p99 {:>8.3}ms  errors {}",
            s.ok as f64 / secs,
            s.p50_us as f64 / 1000.0,
            s.p95_us as f64 / 1000.0,
            s.p99_us as f64 / 1000.0,
            s.errors,
        ),
        Phase::Drain => format!(
            "[{t:>6.1}s] draining: {} ended, {} still in flight",
            s.ended + s.warmup_ended,
            s.in_flight
        ),
    })
}

/// Set only by the real-terminal test: the drawing thread panics after its first frame, to
/// show the terminal is restored all the same.
const PANIC_FOR_TEST: &str = "MCPBENCH_TEST_DASHBOARD_PANIC";

/// The dashboard's loop: redraw when the view changes, on a key or a resize, at most every
/// [`FRAME`]; stop the run on `q`, Esc or Ctrl-C; at the end wait for a key.
/// How the dashboard stops a run, and learns that something else did.
struct Stop {
    interrupt: Box<dyn Fn() + Send>,
    requested: Box<dyn Fn() -> bool + Send>,
    by_viewer: Arc<AtomicBool>,
}

fn dashboard(
    mut rx: watch::Receiver<Option<Arc<Live>>>,
    stop: Stop,
    exit_on_finish: bool,
) -> std::io::Result<()> {
    let mut term = terminal::Screen::enter()?;
    let mut state = ViewState {
        no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        ..ViewState::default()
    };
    let mut live: Option<Arc<Live>> = None;
    let mut dirty = true;
    let mut size = crossterm::terminal::size().ok();
    let panic_for_test = std::env::var_os(PANIC_FOR_TEST).is_some();
    loop {
        match rx.has_changed() {
            Ok(true) => {
                live = rx.borrow_and_update().clone();
                dirty = true;
            }
            Ok(false) => {}
            Err(_) => {
                // The run is over (the last view may not have been seen yet). Its result stays
                // on screen until a key is pressed.
                if !state.waiting_for_key {
                    live = rx.borrow().clone();
                }
                // A viewer who stopped the run has seen enough, and a run stopped by a signal
                // has nobody to wait for: no key to wait for.
                let finished = live.as_ref().is_some_and(|l| l.finished);
                if !finished || exit_on_finish || state.stopping || (stop.requested)() {
                    return Ok(());
                }
                if !state.waiting_for_key {
                    state.waiting_for_key = true;
                    state.stopping = false;
                    dirty = true;
                }
            }
        }
        if dirty {
            term.draw(|f| view::draw(f, live.as_deref(), &state))?;
            dirty = false;
            if panic_for_test {
                panic!("{PANIC_FOR_TEST} is set: the dashboard panics on purpose");
            }
        }
        // Waiting for a key: a signal (SIGTERM; SIGHUP when the terminal went away) ends it.
        if state.waiting_for_key && (stop.requested)() {
            return Ok(());
        }
        // The terminal is polled here, not by crossterm: on a terminal that hung up its
        // event reading loops on end-of-file and never returns. A resize is seen by its size.
        match terminal::wait_input(FRAME) {
            terminal::Input::Gone => return Ok(()),
            terminal::Input::None => {
                let now = crossterm::terminal::size()?;
                if size != Some(now) {
                    size = Some(now);
                    dirty = true;
                }
                continue;
            }
            terminal::Input::Ready => {}
        }
        if !event::poll(Duration::ZERO)? {
            continue;
        }
        match event::read()? {
            Event::Key(k) if k.kind == KeyEventKind::Press => {
                if state.waiting_for_key {
                    return Ok(());
                }
                if state.on_key(k, live.as_deref()) == view::KeyAction::Stop {
                    stop.now(&mut state);
                }
                dirty = true;
            }
            Event::Resize(..) => dirty = true,
            _ => {}
        }
    }
}

impl Stop {
    fn now(&self, state: &mut ViewState) {
        self.by_viewer.store(true, Ordering::Relaxed);
        (self.interrupt)();
        state.stopping = true;
    }
}

#[cfg(test)]
mod tests;
