//! The terminal while the dashboard owns it: raw mode and the alternate screen, restored on
//! every way out — the end of the run, an error, and a panic on any thread (a panic hook
//! restores it before the message is printed, so the message is readable).

use std::io::{Stdout, stdout};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::cursor::{Hide, Show};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// The terminal is in raw mode on the alternate screen.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

/// The terminal, set up for the dashboard; restored when dropped.
pub struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Screen {
    pub fn enter() -> std::io::Result<Screen> {
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = stdout();
        if let Err(e) = execute!(out, EnterAlternateScreen, Hide) {
            restore();
            return Err(e);
        }
        match Terminal::new(CrosstermBackend::new(out)) {
            Ok(terminal) => Ok(Screen { terminal }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }

    pub fn draw(&mut self, f: impl FnOnce(&mut ratatui::Frame)) -> std::io::Result<()> {
        self.terminal.draw(f).map(|_| ())
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Screen")
    }
}

/// Leaves the alternate screen and raw mode, once, if the dashboard had entered them.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        let _ = execute!(stdout(), LeaveAlternateScreen, Show);
    }
}

/// What the terminal has for the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Nothing within the wait.
    None,
    /// Bytes to read (a key).
    Ready,
    /// The terminal went away (its window closed, the pty hung up): reading it would return
    /// end-of-file forever, and crossterm's event reading then never returns.
    Gone,
}

/// The terminal crossterm reads keys from: standard input when it is one, else the process's
/// controlling terminal (a run started in the background has /dev/null as its standard input,
/// which is always readable: polling it would spin).
#[cfg(target_os = "linux")]
fn key_source() -> Option<&'static std::fs::File> {
    use std::io::IsTerminal;
    static TTY: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    if std::io::stdin().is_terminal() {
        return None;
    }
    TTY.get_or_init(|| std::fs::File::open("/dev/tty").ok())
        .as_ref()
}

/// Waits at most `timeout` for input on the terminal, without reading it.
#[cfg(target_os = "linux")]
pub fn wait_input(timeout: std::time::Duration) -> Input {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let fd = match key_source() {
        Some(tty) => tty.as_fd(),
        None => stdin.as_fd(),
    };
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let t = Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    match poll(&mut fds, Some(&t)) {
        Ok(0) => Input::None,
        Ok(_)
            if fds[0]
                .revents()
                .intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) =>
        {
            Input::Gone
        }
        Ok(_) => Input::Ready,
        Err(rustix::io::Errno::INTR) => Input::None,
        Err(_) => Input::Gone,
    }
}

/// Elsewhere: crossterm's own wait (a closed terminal shows as its error).
#[cfg(not(target_os = "linux"))]
pub fn wait_input(timeout: std::time::Duration) -> Input {
    match crossterm::event::poll(timeout) {
        Ok(true) => Input::Ready,
        Ok(false) => Input::None,
        Err(_) => Input::Gone,
    }
}
