//! The dashboard in a real terminal (tmux): it shows the panels and percentiles, `q` stops
//! the run within seconds with results written and exit code 0, and a panic in the drawing
//! thread leaves the terminal usable (normal screen, cooked mode) while the run finishes.
//! Needs `tmux` (`.ci/run` installs it); runs in the `full` profile.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{repo, scratch};

/// One tmux server per test (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `shell` in a detached session of `w`×`h` cells.
    fn start(dir: &Path, shell: &str, w: u16, h: u16) -> Tmux {
        let t = Tmux {
            socket: dir.join("tmux.sock").display().to_string(),
        };
        let ok = t
            .cmd()
            .args(["new-session", "-d", "-s", "t", "-x", &w.to_string(), "-y"])
            .arg(h.to_string())
            .arg(shell)
            .env("TERM", "xterm-256color")
            .status()
            .expect("tmux is installed (apt-get install tmux; .ci/run does)");
        assert!(ok.success(), "tmux new-session");
        t
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-S", &self.socket]);
        c
    }

    fn capture(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-S", "-", "-t", "t"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn send(&self, keys: &str) {
        self.cmd()
            .args(["send-keys", "-t", "t", keys])
            .status()
            .unwrap();
    }

    /// Whether the pane shows the alternate screen.
    fn alternate(&self) -> bool {
        let out = self
            .cmd()
            .args(["display-message", "-p", "-t", "t", "#{alternate_on}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

/// Waits until `f` holds, polling; panics with `what` after `limit`.
fn wait_for(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The shell line: the run, then its exit code and the terminal's mode written to files.
fn shell(dir: &Path, env: &str, duration: &str) -> String {
    format!(
        "cd {repo} && {env} {bin} run scenarios/quickstart.toml --duration {duration} \
         --set load.warmup=1s --output {out}; echo $? > {dir}/exit; stty -a > {dir}/stty; sleep 60",
        repo = repo().display(),
        bin = env!("CARGO_BIN_EXE_mcpbench"),
        out = dir.join("run").display(),
        dir = dir.display(),
    )
}

#[test]
#[ignore = "needs tmux: scripts/test installs it and runs this"]
fn dashboard_shows_the_run_and_q_stops_it() {
    let dir = scratch();
    let tmux = Tmux::start(dir.path(), &shell(dir.path(), "", "60s"), 100, 30);
    wait_for(Duration::from_secs(30), "the dashboard with data", || {
        let screen = tmux.capture();
        screen.contains("operations")
            && screen.contains("p99")
            && screen.contains("tools/call:echo")
            && screen.contains("generator")
    });
    assert!(
        tmux.alternate(),
        "the dashboard draws on the alternate screen"
    );
    let asked = Instant::now();
    tmux.send("q");
    wait_for(Duration::from_secs(15), "the run to stop after q", || {
        dir.path().join("exit").exists()
    });
    let stopped = asked.elapsed();
    let code = std::fs::read_to_string(dir.path().join("exit")).unwrap();
    assert_eq!(
        code.trim(),
        "0",
        "stopping from the dashboard is a normal end"
    );
    assert!(
        stopped < Duration::from_secs(10),
        "the run stopped {stopped:?} after q"
    );
    let summary: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("run/summary.json")).expect("summary.json written"),
    )
    .unwrap();
    assert_eq!(summary["interrupted"], true, "a shorter run says so");
    assert!(summary["totals"]["started"].as_u64().unwrap() > 0);
    assert!(!tmux.alternate(), "the normal screen is back");
    let after = tmux.capture();
    assert!(
        after.contains("tools/call:echo") && after.contains("results:"),
        "the final table is printed after the dashboard: {after}"
    );
    let stty = std::fs::read_to_string(dir.path().join("stty")).unwrap();
    assert!(
        stty.contains(" icanon") && stty.contains(" echo "),
        "cooked mode restored: {stty}"
    );
}

#[test]
#[ignore = "needs tmux: scripts/test installs it and runs this"]
fn a_panic_in_the_dashboard_restores_the_terminal_and_the_run_goes_on() {
    let dir = scratch();
    let env = "MCPBENCH_TEST_DASHBOARD_PANIC=1";
    let tmux = Tmux::start(dir.path(), &shell(dir.path(), env, "3s"), 100, 30);
    wait_for(Duration::from_secs(30), "the run to end", || {
        dir.path().join("exit").exists()
    });
    let code = std::fs::read_to_string(dir.path().join("exit")).unwrap();
    assert_eq!(code.trim(), "0", "the run finished");
    assert!(
        dir.path().join("run/summary.json").exists(),
        "results written"
    );
    assert!(!tmux.alternate(), "the normal screen is back");
    let stty = std::fs::read_to_string(dir.path().join("stty")).unwrap();
    assert!(
        stty.contains(" icanon") && stty.contains(" echo "),
        "cooked mode restored: {stty}"
    );
    let screen = tmux.capture();
    assert!(
        screen.contains("panics on purpose") && screen.contains("the dashboard stopped"),
        "the panic is reported, readable: {screen}"
    );
}

/// A finished run waits for a key; when its terminal goes away instead (the window closed:
/// SIGHUP, and reads that return end-of-file for ever) the process ends — it once spun a
/// core at 100 % in crossterm's read loop, waiting for a key that could never come.
#[test]
#[ignore = "needs tmux: scripts/test installs it and runs this"]
fn a_finished_dashboard_whose_terminal_closes_exits() {
    let dir = scratch();
    let pid_file = dir.path().join("pid");
    let line = format!(
        // In the background of a shell (its standard input /dev/null, keys read from /dev/tty),
        // `$!` being mcpbench itself.
        "cd {repo}; {bin} run scenarios/quickstart.toml --duration 2s --set load.warmup=0s --output {out} & echo $! > {pid}; wait",
        repo = repo().display(),
        bin = env!("CARGO_BIN_EXE_mcpbench"),
        out = dir.path().join("run").display(),
        pid = pid_file.display(),
    );
    let tmux = Tmux::start(dir.path(), &line, 100, 30);
    wait_for(Duration::from_secs(30), "the finished dashboard", || {
        tmux.capture().contains("press any key to exit")
    });
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    let alive = || Path::new(&format!("/proc/{pid}")).exists();
    assert!(alive());
    drop(tmux);
    wait_for(
        Duration::from_secs(15),
        "the process to end with its terminal",
        || !alive(),
    );
    assert!(dir.path().join("run/summary.json").is_file());
}
