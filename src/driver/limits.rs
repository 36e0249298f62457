//! The machine's limits a run must fit in: open files (the soft limit raised to the hard one
//! at start), ephemeral ports and processes, checked before load — so a run that cannot fit
//! fails with one clear error (exit 2, what to change) instead of a cascade of failed
//! connects. What still runs out during a run is the `local` outcome class.

use crate::scenario::{Plan, Sessions, Target};
use crate::transport::TransportKind;

/// File descriptors a run needs besides its connections: the runtime's (epoll, eventfd and
/// timers per worker), the results files, stdio and the embedded servers' listeners.
const BASE_FDS: u64 = 64;

/// Linux keeps a closed connection's port in TIME_WAIT this long.
pub const TIME_WAIT_SECS: f64 = 60.0;

/// Why a run cannot fit on this machine.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LimitError {
    #[error(
        "this run needs about {need} file descriptors ({why}), but the open-file limit is {soft} \
         (hard limit {hard}): raise it (`ulimit -n {need}` in the shell, LimitNOFILE= for a \
         systemd unit, nofile in /etc/security/limits.conf, --ulimit nofile= for docker) or \
         lower load.concurrency to about {fits}"
    )]
    Files {
        need: u64,
        why: String,
        soft: u64,
        hard: String,
        fits: u64,
    },
    #[error(
        "this run keeps up to {need} connections open to the target, more than the {range} \
         ephemeral ports of net.ipv4.ip_local_port_range ({lo}–{hi}): widen the range \
         (`sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"`), or lower load.concurrency"
    )]
    Ports {
        need: u64,
        range: u64,
        lo: u64,
        hi: u64,
    },
    #[error(
        "this run starts up to {need} processes of the stdio target, but the process limit is \
         {limit}: raise it (`ulimit -u`), or use sessions = \"shared\" (one process per worker)"
    )]
    Processes { need: u64, limit: u64 },
}

/// What a plan holds open at its peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Sessions open at once.
    pub sessions: u64,
    /// Connections to the target (per session: one, two for legacy SSE).
    pub connections: u64,
    /// File descriptors of this process…
    pub fds: u64,
    /// …of which each session takes this many.
    pub fds_per_session: u64,
    /// Child processes (stdio targets).
    pub processes: u64,
}

/// The peak of what a plan holds open, with `workers` threads.
pub fn needs(plan: &Plan, workers: usize) -> Needs {
    let conn = plan.connection();
    let concurrency = plan.load.concurrency as u64;
    let sessions = match plan.load.sessions {
        Sessions::Shared => (workers as u64).min(concurrency).max(1),
        Sessions::PerVu | Sessions::PerRequest => concurrency,
    };
    let (per_session, fds_per_session) = match conn.transport {
        // The GET stream and the POSTs' connection.
        TransportKind::LegacySse => (2, 2),
        // stdin, stdout and stderr pipes.
        TransportKind::Stdio => (0, 3),
        TransportKind::StreamableHttp | TransportKind::WebSocket => (1, 1),
    };
    // HTTP/2 sessions sharing connections: each worker's users fill theirs in turn.
    let shared = match &plan.target {
        Target::Remote(r) if conn.http2 && r.sessions_per_connection > 1 => {
            let (w, n) = (workers.max(1) as u64, r.sessions_per_connection as u64);
            let per_worker = |i| (sessions / w + u64::from(i < sessions % w)).div_ceil(n);
            Some((0..w).map(per_worker).sum::<u64>())
        }
        _ => None,
    };
    let connections = shared.unwrap_or(sessions * per_session);
    // An embedded server holds the other end of each connection in this process too.
    let embedded = matches!(plan.target, Target::Embedded(_)) && per_session > 0;
    let fds_per_session = fds_per_session * if embedded { 2 } else { 1 };
    let fds = fds_for(shared.unwrap_or(sessions), fds_per_session, workers);
    let processes = if conn.transport == TransportKind::Stdio {
        sessions
    } else {
        0
    };
    Needs {
        sessions,
        connections,
        fds,
        fds_per_session,
        processes,
    }
}

/// File descriptors a run holds with `sessions` open at once, each taking `fds_per_session`,
/// on `workers` threads.
pub fn fds_for(sessions: u64, fds_per_session: u64, workers: usize) -> u64 {
    BASE_FDS + 4 * workers as u64 + sessions * fds_per_session
}

/// The machine's limits, as read now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    /// Open files: soft limit, hard limit (`None`: unlimited).
    pub files: (u64, Option<u64>),
    /// The ephemeral port range.
    pub ports: Option<(u64, u64)>,
    /// Processes (`None`: unlimited).
    pub processes: Option<u64>,
}

impl Machine {
    /// Reads the limits of this process and the port range.
    pub fn read() -> Machine {
        Machine {
            files: open_files(),
            ports: port_range(),
            processes: process_limit(),
        }
    }

    /// Whether `needs` fits; the first limit it breaks, said so a person can fix it.
    pub fn check(&self, needs: &Needs, per_session: &str) -> Result<(), LimitError> {
        let (soft, hard) = self.files;
        if needs.fds > soft {
            let per = needs.fds_per_session.max(1);
            let fixed = needs.fds.saturating_sub(needs.sessions * per);
            return Err(LimitError::Files {
                need: needs.fds,
                why: format!("{} sessions, {per_session}", needs.sessions),
                soft,
                hard: hard.map_or_else(|| "unlimited".into(), |h| h.to_string()),
                fits: soft.saturating_sub(fixed) / per,
            });
        }
        if let Some((lo, hi)) = self.ports {
            let range = hi.saturating_sub(lo) + 1;
            if needs.connections > range {
                return Err(LimitError::Ports {
                    need: needs.connections,
                    range,
                    lo,
                    hi,
                });
            }
        }
        if let Some(limit) = self.processes
            && needs.processes > limit
        {
            return Err(LimitError::Processes {
                need: needs.processes,
                limit,
            });
        }
        Ok(())
    }
}

/// What one session costs, in words, for the error.
pub fn per_session(plan: &Plan) -> &'static str {
    let embedded = matches!(plan.target, Target::Embedded(_));
    match (plan.connection().transport, embedded) {
        (TransportKind::Stdio, _) => "3 pipes to each stdio process",
        (TransportKind::LegacySse, true) => "2 connections each, both ends in this process",
        (TransportKind::LegacySse, false) => "2 connections each",
        (_, true) => "a connection each, both ends in this process (embedded server)",
        (_, false) => "a connection each",
    }
}

/// Raises the open-file soft limit to the hard limit (a load generator needs a descriptor per
/// connection; the usual soft limit is 1024). Returns the soft limit before and after.
pub fn raise_open_files() -> (u64, u64) {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let mut l = getrlimit(Resource::Nofile);
        let before = l.current.unwrap_or(u64::MAX);
        if l.current != l.maximum {
            l.current = l.maximum;
            if setrlimit(Resource::Nofile, l).is_ok() {
                return (before, open_files().0);
            }
        }
        (before, before)
    }
    #[cfg(not(target_os = "linux"))]
    (u64::MAX, u64::MAX)
}

/// The open-file limit of this process: soft, hard (`None`: unlimited).
pub fn open_files() -> (u64, Option<u64>) {
    #[cfg(target_os = "linux")]
    {
        let l = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        (l.current.unwrap_or(u64::MAX), l.maximum)
    }
    #[cfg(not(target_os = "linux"))]
    (u64::MAX, None)
}

fn process_limit() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nproc).current
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// `net.ipv4.ip_local_port_range`, where Linux says it.
pub fn port_range() -> Option<(u64, u64)> {
    parse_port_range(&std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?)
}

/// The two numbers of `ip_local_port_range` (`"32768\t60999\n"`), low first.
pub fn parse_port_range(s: &str) -> Option<(u64, u64)> {
    let mut it = s.split_whitespace().map(str::parse::<u64>);
    let range = (it.next()?.ok()?, it.next()?.ok()?);
    (range.0 <= range.1 && it.next().is_none()).then_some(range)
}

/// `net.ipv4.tcp_tw_reuse`: 0 off, 1 on, 2 loopback only (the default since Linux 4.19).
pub fn tw_reuse() -> Option<u8> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_tw_reuse")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether `net.ipv4.tcp_tw_reuse` (as [`tw_reuse`] reads it) lets new connections to this
/// target take over ports in TIME_WAIT.
pub fn tw_reuse_covers(setting: Option<u8>, loopback: bool) -> bool {
    match setting {
        Some(1) => true,
        Some(2) => loopback,
        _ => false,
    }
}

/// The rate of new connections (per second) whose ports in TIME_WAIT fill half of a `range`
/// of ephemeral ports: past it, connects start to fail on a busy machine.
pub fn churn_limit(range: u64) -> f64 {
    range as f64 * 0.5 / TIME_WAIT_SECS
}

/// Session churn: when connections closed at this rate would hold more ports in TIME_WAIT than
/// the ephemeral range has, what to know (none when they fit, or when reuse makes it moot).
pub fn time_wait_note(connections: u64, seconds: f64, loopback: bool) -> Option<String> {
    if seconds <= 0.0 || connections == 0 {
        return None;
    }
    let rate = connections as f64 / seconds;
    let held = rate * TIME_WAIT_SECS;
    let (lo, hi) = port_range()?;
    let range = hi.saturating_sub(lo) + 1;
    if rate < churn_limit(range) {
        return None;
    }
    Some(if tw_reuse_covers(tw_reuse(), loopback) {
        format!(
            "{rate:.0} connections/s were opened: their ports would stay in TIME_WAIT for {TIME_WAIT_SECS:.0} s ({held:.0} at once, against {range} ephemeral ports), but net.ipv4.tcp_tw_reuse lets new connections take them over; failed connects would show as local(no_ports)"
        )
    } else {
        format!(
            "{rate:.0} connections/s were opened: their ports stay in TIME_WAIT for {TIME_WAIT_SECS:.0} s ({held:.0} at once) against {range} ephemeral ports, and net.ipv4.tcp_tw_reuse is off for this target: longer runs will fail to connect (local(no_ports)); reuse sessions or connections, widen net.ipv4.ip_local_port_range, or set net.ipv4.tcp_tw_reuse=1"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(files: u64) -> Machine {
        Machine {
            files: (files, Some(files)),
            ports: Some((32768, 60999)),
            processes: Some(100),
        }
    }

    #[test]
    fn churn_that_would_fill_the_port_range_is_noted() {
        if port_range().is_none() {
            return; // not Linux: nothing to read the range from
        }
        // 1000 connections in 10 s: 6000 ports held at most, well inside any range.
        assert_eq!(time_wait_note(1000, 10.0, true), None);
        let note = time_wait_note(10_000_000, 10.0, false).expect("a million a second");
        assert!(
            note.contains("TIME_WAIT") && note.contains("1000000 connections/s"),
            "{note}"
        );
    }

    #[test]
    fn limits_are_checked_in_order_with_what_to_change() {
        let needs = Needs {
            sessions: 1000,
            connections: 1000,
            fds: 64 + 8 + 2000,
            fds_per_session: 2,
            processes: 0,
        };
        let e = machine(1024)
            .check(&needs, "a connection each")
            .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("2072 file descriptors"), "{text}");
        assert!(text.contains("ulimit -n 2072"), "{text}");
        assert!(
            text.contains("lower load.concurrency to about 476"),
            "{text}"
        );
        assert!(machine(4096).check(&needs, "").is_ok());
        let ports = Needs {
            connections: 40000,
            fds: 100,
            ..needs
        };
        assert!(matches!(
            machine(4096).check(&ports, ""),
            Err(LimitError::Ports { range: 28232, .. })
        ));
        let procs = Needs {
            processes: 101,
            fds: 100,
            connections: 0,
            ..needs
        };
        assert!(matches!(
            machine(4096).check(&procs, ""),
            Err(LimitError::Processes { need: 101, .. })
        ));
    }
}
