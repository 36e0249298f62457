//! The machine's limits a run must fit in: open files (the soft limit raised to the hard one
//! at start), ephemeral ports and processes, checked before load — so a run that cannot fit
//! fails with one clear error (exit 2, what to change) instead of a cascade of failed
//! connects. What still runs out during a run is the `local` outcome class.

use crate::scenario::plan::Model;
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
        "this run needs about {need} file descriptors ({why}), more than one process may open \
         here (hard limit {hard}, raised only by root): lower load.concurrency to about \
         {fits}, {ways}"
    )]
    FilesHard {
        need: u64,
        why: String,
        hard: u64,
        fits: u64,
        /// The other ways out, said for this plan.
        ways: String,
    },
    #[error(
        "this run needs about {need} ephemeral ports ({why}), but {addresses} source \
         address{plural} of {range} ports each ({lo}–{hi}) hold{s} {have}: {fix}",
        plural = if *.addresses == 1 { "" } else { "es" },
        s = if *.addresses == 1 { "s" } else { "" },
        have = .addresses * .range
    )]
    Ports {
        need: u64,
        why: String,
        addresses: u64,
        range: u64,
        lo: u64,
        hi: u64,
        fix: String,
    },
    #[error(
        "this run starts up to {need} processes of the stdio target, but the process limit is \
         {limit}: raise it (`ulimit -u`), or use sessions = \"shared\" (one process per worker)"
    )]
    Processes { need: u64, limit: u64 },
}

/// How a plan's connections are made, for the checks and for the ways out they name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit<'a> {
    /// What one session costs, in words ([`per_session`]).
    pub per_session: &'a str,
    /// Source addresses the connections come from (1 when the system picks).
    pub addresses: u64,
    /// The target is on loopback (a block of 127.x.y.z can be given; `tcp_tw_reuse=2`
    /// covers it).
    pub loopback: bool,
    /// Sessions opened and closed a second, where the plan says ([`churn`]): each
    /// connection closed holds its port in TIME_WAIT for [`TIME_WAIT_SECS`] after.
    pub churn: f64,
    /// The target is the embedded server, in this process (local shards would each start
    /// their own).
    pub embedded: bool,
    /// This run is one of this many shards.
    pub shards: u64,
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
    /// `net.ipv4.tcp_tw_reuse` ([`tw_reuse`]).
    pub tw_reuse: Option<u8>,
}

impl Machine {
    /// Reads the limits of this process and the port range.
    pub fn read() -> Machine {
        Machine {
            files: open_files(),
            ports: port_range(),
            processes: process_limit(),
            tw_reuse: tw_reuse(),
        }
    }

    /// Whether `needs` fits; the first limit it breaks, said so a person can fix it.
    pub fn check(&self, needs: &Needs, fit: &Fit<'_>) -> Result<(), LimitError> {
        self.check_files(needs, fit)?;
        self.check_ports(needs, fit)?;
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

    /// Descriptors: past the hard limit no `ulimit` helps, only a smaller or split run.
    fn check_files(&self, needs: &Needs, fit: &Fit<'_>) -> Result<(), LimitError> {
        let (soft, hard) = self.files;
        if needs.fds <= soft {
            return Ok(());
        }
        let per = needs.fds_per_session.max(1);
        let fixed = needs.fds.saturating_sub(needs.sessions * per);
        let why = format!("{} sessions, {}", needs.sessions, fit.per_session);
        let Some(hard) = hard.filter(|h| needs.fds > *h) else {
            return Err(LimitError::Files {
                need: needs.fds,
                why,
                soft,
                hard: hard.map_or_else(|| "unlimited".into(), |h| h.to_string()),
                fits: soft.saturating_sub(fixed) / per,
            });
        };
        let fits = hard.saturating_sub(fixed) / per;
        // Processes of this share each: every one has the fixed part too.
        let split = (needs.sessions * per).div_ceil(fits.max(1) * per).max(2);
        let ways = if fit.embedded {
            "or start the reference server in a process of its own (`mcpbench serve`, then \
             target.url): it holds half of these, and a split run needs it to"
                .to_string()
        } else {
            let split_run = if fit.shards > 1 {
                format!(
                    "or split the run into {} shards (--shard I/{})",
                    split * fit.shards,
                    split * fit.shards
                )
            } else {
                format!(
                    "or split it over {split} processes on this machine: --local-shards {split}"
                )
            };
            format!(
                "share connections between sessions (HTTP/2: [target] http = \"2\" with \
                 sessions_per_connection), {split_run}"
            )
        };
        Err(LimitError::FilesHard {
            need: needs.fds,
            why,
            hard,
            fits,
            ways,
        })
    }

    /// Ports: each source address has the ephemeral range; connections are open at once, and
    /// where the plan churns them and `tcp_tw_reuse` does not take TIME_WAIT ports over,
    /// those closed in the last minute hold theirs too.
    pub fn check_ports(&self, needs: &Needs, fit: &Fit<'_>) -> Result<(), LimitError> {
        let Some((lo, hi)) = self.ports else {
            return Ok(());
        };
        let range = hi.saturating_sub(lo) + 1;
        let addresses = fit.addresses.max(1);
        let per_session = needs.connections / needs.sessions.max(1);
        let waiting = if tw_reuse_covers(self.tw_reuse, fit.loopback) {
            0
        } else {
            (fit.churn * per_session as f64 * TIME_WAIT_SECS).ceil() as u64
        };
        let need = needs.connections + waiting;
        if need.div_ceil(addresses) <= range {
            return Ok(());
        }
        let why = if waiting > 0 {
            format!(
                "{} connections open at once, and {waiting} in TIME_WAIT: {:.0} closed a second \
                 × {TIME_WAIT_SECS:.0} s",
                needs.connections,
                fit.churn * per_session as f64
            )
        } else {
            format!("{} connections open at once", needs.connections)
        };
        let wanted = need.div_ceil(range);
        let widen = "widen net.ipv4.ip_local_port_range (`sysctl -w \
                     net.ipv4.ip_local_port_range=\"1024 65535\"`)";
        let fix = if fit.loopback {
            let block = crate::transport::sources::loopback_block(wanted);
            let size = wanted.next_power_of_two();
            format!("give --source-address {block} ({size} addresses), or {widen}")
        } else {
            format!(
                "give --source-address a list of {wanted} addresses of this machine, or {widen}, \
                 or lower load.concurrency"
            )
        };
        Err(LimitError::Ports {
            need,
            why,
            addresses,
            range,
            lo,
            hi,
            fix,
        })
    }
}

/// Sessions a plan opens and closes a second, where it says: per-request sessions at an
/// open-loop rate (this shard's share); 0 otherwise (sessions kept, or a closed loop's rate
/// that only the run shows — then [`time_wait_note`] says it after).
pub fn churn(plan: &Plan) -> f64 {
    match (&plan.load.model, plan.load.sessions) {
        (Model::Open { rate, .. }, Sessions::PerRequest) => {
            rate.max() / plan.load.shard.count.max(1) as f64
        }
        _ => 0.0,
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
            tw_reuse: Some(2),
        }
    }

    const FIT: Fit<'static> = Fit {
        per_session: "a connection each",
        addresses: 1,
        loopback: true,
        churn: 0.0,
        embedded: false,
        shards: 1,
    };

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
        // Under the hard limit: raise the soft one.
        let soft = Machine {
            files: (1024, Some(4096)),
            ..machine(1024)
        };
        let text = soft.check(&needs, &FIT).unwrap_err().to_string();
        assert!(text.contains("2072 file descriptors"), "{text}");
        assert!(text.contains("ulimit -n 2072"), "{text}");
        assert!(
            text.contains("lower load.concurrency to about 476"),
            "{text}"
        );
        assert!(machine(4096).check(&needs, &FIT).is_ok());
        let ports = Needs {
            connections: 40000,
            fds: 100,
            ..needs
        };
        assert!(matches!(
            machine(4096).check(&ports, &FIT),
            Err(LimitError::Ports { range: 28232, .. })
        ));
        let procs = Needs {
            processes: 101,
            fds: 100,
            connections: 0,
            ..needs
        };
        assert!(matches!(
            machine(4096).check(&procs, &FIT),
            Err(LimitError::Processes { need: 101, .. })
        ));
    }

    /// Past the hard limit no ulimit helps: the refusal names the number and the ways out.
    #[test]
    fn past_the_hard_limit_the_run_is_refused_with_the_ways_out() {
        let needs = Needs {
            sessions: 50_000,
            connections: 50_000,
            fds: 64 + 8 + 50_000,
            fds_per_session: 1,
            processes: 0,
        };
        let text = machine(20_000).check(&needs, &FIT).unwrap_err().to_string();
        assert!(text.contains("about 50072 file descriptors"), "{text}");
        assert!(text.contains("hard limit 20000"), "{text}");
        assert!(
            text.contains("lower load.concurrency to about 19928"),
            "{text}"
        );
        assert!(text.contains("sessions_per_connection"), "{text}");
        // ⌈50 000 / 19 928⌉ processes, each with its fixed part.
        assert!(text.contains("--local-shards 3"), "{text}");
        let shard = Fit { shards: 2, ..FIT };
        let text = machine(20_000)
            .check(&needs, &shard)
            .unwrap_err()
            .to_string();
        assert!(text.contains("6 shards (--shard I/6)"), "{text}");
        let embedded = Fit {
            embedded: true,
            ..FIT
        };
        let text = machine(20_000)
            .check(&needs, &embedded)
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("mcpbench serve") && !text.contains("--local-shards"),
            "{text}"
        );
    }

    /// Ports are counted per source address, TIME_WAIT included where reuse does not cover
    /// it; the fix names a block of addresses that fits.
    #[test]
    fn ports_are_counted_per_source_address_with_the_block_that_fits() {
        let needs = Needs {
            sessions: 100_000,
            connections: 100_000,
            fds: 100,
            fds_per_session: 1,
            processes: 0,
        };
        let m = machine(200_000);
        let text = m.check(&needs, &FIT).unwrap_err().to_string();
        assert!(text.contains("about 100000 ephemeral ports"), "{text}");
        assert!(
            text.contains("1 source address of 28232 ports each (32768–60999) holds 28232"),
            "{text}"
        );
        assert!(
            text.contains("--source-address 127.0.0.0/30 (4 addresses)"),
            "{text}"
        );
        let four = Fit {
            addresses: 4,
            ..FIT
        };
        assert!(m.check(&needs, &four).is_ok());
        // 1000 sessions a second closed, TIME_WAIT not reused (a remote target, reuse=2):
        // 60 000 more ports held.
        let churn = Fit {
            addresses: 4,
            loopback: false,
            churn: 1000.0,
            ..FIT
        };
        let text = m.check(&needs, &churn).unwrap_err().to_string();
        assert!(text.contains("about 160000 ephemeral ports"), "{text}");
        assert!(
            text.contains("60000 in TIME_WAIT: 1000 closed a second × 60 s"),
            "{text}"
        );
        assert!(
            text.contains("4 source addresses of 28232 ports each"),
            "{text}"
        );
        assert!(
            text.contains("a list of 6 addresses of this machine"),
            "{text}"
        );
        // On loopback tcp_tw_reuse=2 takes those ports over.
        assert!(
            m.check(
                &needs,
                &Fit {
                    loopback: true,
                    ..churn
                }
            )
            .is_ok()
        );
    }
}
