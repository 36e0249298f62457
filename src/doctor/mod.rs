//! `mcpbench doctor`: what a load test needs of this machine, and what would make its
//! measurements unreliable — each finding with the one-line fix.
//!
//! Linux only (procfs and sysfs); elsewhere every check says it was not checked here. The
//! open-file and port arithmetic is `driver::limits`' (the same a run is refused by), not a
//! copy. Parsers are pure functions of the files' text, tested on fixtures; reading the files
//! and measuring (timer, clock reads, a 1 s sample of the cores) happen at the edges.
//!
//! The JSON form (`--format json`) is [`Report`]: `schema_version` (1), `concurrency`,
//! `quick`, and `findings`, a list of `{check, value, verdict, detail, fix}` — `check` a stable
//! id (`open-files`, `ephemeral-ports`, `time-wait-reuse`, `timer`, `clock`, `cpu-frequency`,
//! `cpu-quota`, `other-load`, `load-average`, `somaxconn`, `transparent-hugepages`, `swap`),
//! `verdict` one of `ok`, `info`, `warn`, `fix` a one-line command or advice (`null` when
//! there is nothing to do). Any `warn` is exit code 1.

// Elsewhere the findings are not made, so neither are the parsers used.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::time::Duration;

use serde::Serialize;

use crate::driver::limits;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Nothing to do.
    Ok,
    /// Worth knowing; does not by itself make measurements unreliable.
    Info,
    /// Would make measurements unreliable (or a run impossible): exit 1.
    Warn,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Info => "info",
            Verdict::Warn => "warn",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// A stable id (`open-files`, `timer`…).
    pub check: &'static str,
    /// What was read or measured, short.
    pub value: String,
    pub verdict: Verdict,
    /// Why it matters (or why it does not), a sentence.
    pub detail: String,
    /// What to do, one line; `None` when there is nothing to do.
    pub fix: Option<String>,
}

impl Finding {
    fn new(check: &'static str, verdict: Verdict, value: impl Into<String>) -> Self {
        Finding {
            check,
            value: value.into(),
            verdict,
            detail: String::new(),
            fix: None,
        }
    }

    fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// What `doctor` found, in the order checked.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The version of this JSON shape.
    pub schema_version: u32,
    /// The load the open-file, port and backlog checks were sized for.
    pub concurrency: u64,
    /// Whether the timer measurement and the CPU sample were skipped.
    pub quick: bool,
    pub findings: Vec<Finding>,
}

impl Report {
    /// Findings that would make measurements unreliable.
    pub fn warnings(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.verdict == Verdict::Warn)
            .count()
    }
}

/// What to check for.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The virtual users (connections to one target) planned.
    pub concurrency: u64,
    /// Skip what takes time: the timer measurement and the 1 s sample of the cores.
    pub quick: bool,
    /// The open-file soft limit before mcpbench raised it at start (`u64::MAX`: unlimited).
    pub soft_files_at_start: u64,
}

/// Every check, in order: ids of the JSON form.
pub const CHECKS: [&str; 12] = [
    "open-files",
    "ephemeral-ports",
    "time-wait-reuse",
    "timer",
    "clock",
    "cpu-frequency",
    "cpu-quota",
    "other-load",
    "load-average",
    "somaxconn",
    "transparent-hugepages",
    "swap",
];

/// Sleeps of the timer measurement, and how long each asks for.
const TIMER_SLEEPS: usize = 200;
const TIMER_SLEEP: Duration = Duration::from_micros(50);
/// A timer overshoot p99 past this shows up in open-loop latency.
const TIMER_P99_WARN: Duration = Duration::from_micros(200);
/// A clock read costing more than this (ns) is a syscall, not the vDSO.
const CLOCK_READ_WARN_NS: f64 = 200.0;
/// Other work on the cores past this share of the CPU makes measurements noisy.
const OTHER_LOAD_WARN: f64 = 0.10;

/// Runs every check (Linux), or says none was checked (elsewhere).
pub fn examine(o: &Options) -> Report {
    #[cfg(target_os = "linux")]
    let findings = linux::examine(o);
    #[cfg(not(target_os = "linux"))]
    let findings = CHECKS
        .iter()
        .map(|&c| {
            Finding::new(c, Verdict::Info, "not checked here")
                .detail("these checks read Linux procfs and sysfs")
        })
        .collect();
    Report {
        schema_version: 1,
        concurrency: o.concurrency,
        quick: o.quick,
        findings,
    }
}

// ---------------------------------------------------------------------------------------------
// Findings from what was read: pure.

fn limit(n: u64) -> String {
    if n == u64::MAX {
        "unlimited".into()
    } else {
        n.to_string()
    }
}

/// The open-file limit against the descriptors `concurrency` connections need. mcpbench raises
/// the soft limit to the hard one at start, so what counts is the limit after that (`now`).
fn open_files_finding(at_start: u64, now: (u64, Option<u64>), need: u64, users: u64) -> Finding {
    let (soft, hard) = now;
    let hard = hard.unwrap_or(u64::MAX);
    let value = if soft > at_start {
        format!(
            "soft {} (raised to {} at start), hard {}; {users} connections need about {need}",
            limit(at_start),
            limit(soft),
            limit(hard)
        )
    } else {
        format!(
            "soft {}, hard {}; {users} connections need about {need}",
            limit(soft),
            limit(hard)
        )
    };
    let need_text = format!(
        "{users} connections need about {need} descriptors (one each, plus the runtime's; an \
         embedded target holds both ends, twice that)"
    );
    if need > soft {
        Finding::new("open-files", Verdict::Warn, value)
            .detail(format!(
                "{need_text}, more than the {} mcpbench can raise its soft limit to: a run this \
                 size is refused before load",
                limit(soft)
            ))
            .fix(format!(
                "ulimit -n {} (as root, or LimitNOFILE= in a systemd unit, nofile in \
                 /etc/security/limits.conf, docker --ulimit nofile=)",
                need.max(65536)
            ))
    } else if need > at_start {
        Finding::new("open-files", Verdict::Info, value)
            .detail(format!(
                "{need_text}: mcpbench raises its soft limit to the hard one at start, but a \
                 server under test started from this shell keeps {}",
                limit(at_start)
            ))
            .fix(format!(
                "ulimit -n {} in the shell that starts a server under test here",
                limit(soft)
            ))
    } else {
        Finding::new("open-files", Verdict::Ok, value).detail(need_text)
    }
}

/// The ephemeral port range against the connections planned and the ports in TIME_WAIT now.
fn ports_finding(range: Option<(u64, u64)>, time_wait: Option<u64>, users: u64) -> Finding {
    let Some((lo, hi)) = range else {
        return Finding::new("ephemeral-ports", Verdict::Info, "not exposed")
            .detail("no /proc/sys/net/ipv4/ip_local_port_range");
    };
    let size = hi - lo + 1;
    let tw = time_wait.unwrap_or(0);
    let value = format!("{size} ports ({lo}–{hi}), {tw} sockets in TIME_WAIT");
    let fix = "sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"";
    if users > size {
        Finding::new("ephemeral-ports", Verdict::Warn, value)
            .detail(format!(
                "{users} connections to one target need more local ports than the range has: \
                 a run this size is refused before load"
            ))
            .fix(fix)
    } else if users + tw > size {
        Finding::new("ephemeral-ports", Verdict::Warn, value)
            .detail(format!(
                "sockets in TIME_WAIT now leave about {} ports of the range free, fewer than \
                 the {users} connections planned: connects would fail (local(no_ports)) until \
                 they expire ({:.0} s)",
                size.saturating_sub(tw),
                limits::TIME_WAIT_SECS
            ))
            .fix(format!("{fix}, or wait a minute for TIME_WAIT to clear"))
    } else {
        Finding::new("ephemeral-ports", Verdict::Ok, value).detail(format!(
            "room for the {users} connections planned, beside those in TIME_WAIT"
        ))
    }
}

/// `tcp_tw_reuse` and the session churn the port range sustains without it.
fn tw_reuse_finding(setting: Option<u8>, range: Option<(u64, u64)>) -> Finding {
    let Some(s) = setting else {
        return Finding::new("time-wait-reuse", Verdict::Info, "not exposed")
            .detail("no /proc/sys/net/ipv4/tcp_tw_reuse");
    };
    let words = match s {
        0 => "off",
        1 => "on",
        2 => "loopback only",
        _ => "unknown",
    };
    let value = format!("tcp_tw_reuse={s} ({words})");
    if limits::tw_reuse_covers(Some(s), false) {
        return Finding::new("time-wait-reuse", Verdict::Ok, value).detail(
            "new connections take over ports in TIME_WAIT: session churn does not run out of ports",
        );
    }
    let churn = match range {
        Some((lo, hi)) => {
            let size = hi - lo + 1;
            format!(
                "new connections faster than about {:.0}/s (per-request sessions, reconnects) \
                 hold half the {size} ports in TIME_WAIT ({:.0} s each) and connects start to \
                 fail (local(no_ports))",
                limits::churn_limit(size),
                limits::TIME_WAIT_SECS
            )
        }
        None => "session churn holds ports in TIME_WAIT".into(),
    };
    let to = if limits::tw_reuse_covers(Some(s), true) {
        "to a remote target, "
    } else {
        ""
    };
    Finding::new("time-wait-reuse", Verdict::Info, value)
        .detail(format!("{to}{churn}"))
        .fix("sysctl -w net.ipv4.tcp_tw_reuse=1")
}

/// The `q` quantile of sorted samples (nearest rank).
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// Overshoots of 50 µs sleeps: on the timerfd (what the open loop dispatches on) and with
/// `std::thread::sleep` (with timer slack), both sorted. `None`: not measured.
fn timer_finding(timerfd: Option<&[Duration]>, sleep: &[Duration]) -> Finding {
    let sleeps = format!(
        "{} sleeps of {}",
        sleep.len().max(timerfd.map_or(0, <[_]>::len)),
        micros(TIMER_SLEEP)
    );
    let slept = if sleep.is_empty() {
        String::new()
    } else {
        format!(
            "; std::thread::sleep (with the thread's timer slack): p50 {}, p99 {}",
            micros(quantile(sleep, 0.5)),
            micros(quantile(sleep, 0.99))
        )
    };
    let Some(fd) = timerfd else {
        return Finding::new("timer", Verdict::Info, "timerfd not available")
            .detail(format!("the open loop falls back to 1 ms ticks{slept}"));
    };
    let (p50, p99) = (quantile(fd, 0.5), quantile(fd, 0.99));
    let value = format!("timerfd overshoot p50 {}, p99 {}", micros(p50), micros(p99));
    let why = format!(
        "{sleeps} on a timerfd, the open loop's dispatch clock: its overshoot is lateness every \
         open-loop request's latency includes{slept}"
    );
    if p99 > TIMER_P99_WARN {
        Finding::new("timer", Verdict::Warn, value)
            .detail(format!("{why}; p99 above {}", micros(TIMER_P99_WARN)))
            .fix(
                "dedicated cores (bare metal, or a VM with dedicated vCPUs); shallow C-states: \
                 cpupower idle-set -D 10",
            )
    } else {
        Finding::new("timer", Verdict::Ok, value).detail(why)
    }
}

/// The clocksource and what one `Instant::now()` costs.
fn clock_finding(source: Option<&str>, available: Option<&str>, ns_per_read: f64) -> Finding {
    let source = source.map(str::trim).filter(|s| !s.is_empty());
    let value = format!(
        "{}, Instant::now {ns_per_read:.0} ns",
        source.unwrap_or("clocksource not exposed")
    );
    let why = "two clock reads time every request";
    let fast = matches!(source, Some("tsc" | "arch_sys_counter"));
    if ns_per_read > CLOCK_READ_WARN_NS {
        let tsc = available.is_some_and(|a| a.split_whitespace().any(|s| s == "tsc"));
        Finding::new("clock", Verdict::Warn, value)
            .detail(format!(
                "{why}: at {ns_per_read:.0} ns each (a system call, not the vDSO) they add CPU \
                 and latency the target did not cause"
            ))
            .fix(if tsc {
                "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource"
            } else {
                "a machine (VM type) whose clocksource is read in user space: tsc, kvm-clock"
            })
    } else if source.is_some() && !fast {
        Finding::new("clock", Verdict::Info, value).detail(format!(
            "{why}; reads are cheap enough here, though tsc is the cheapest"
        ))
    } else {
        Finding::new("clock", Verdict::Ok, value).detail(why)
    }
}

/// Each core's `scaling_governor`.
fn governor_finding(governors: &[String]) -> Finding {
    if governors.is_empty() {
        return Finding::new("cpu-frequency", Verdict::Info, "not exposed").detail(
            "no cpufreq in sysfs (typical of VMs: the host decides the frequency, and may \
             change it)",
        );
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for g in governors {
        let g = g.trim();
        match counts.iter_mut().find(|(name, _)| *name == g) {
            Some((_, n)) => *n += 1,
            None => counts.push((g, 1)),
        }
    }
    let value = counts
        .iter()
        .map(|(g, n)| format!("{g} ({n} core{})", if *n == 1 { "" } else { "s" }))
        .collect::<Vec<_>>()
        .join(", ");
    if counts.iter().all(|(g, _)| *g == "performance") {
        Finding::new("cpu-frequency", Verdict::Ok, value)
            .detail("the cores run at full frequency, whatever ran before")
    } else {
        Finding::new("cpu-frequency", Verdict::Warn, value)
            .detail(
                "cores change frequency with load: the same work takes longer right after they \
                 idled, so latency depends on what ran before",
            )
            .fix("cpupower frequency-set -g performance")
    }
}

/// The CPU quota of this cgroup (in CPUs; `None`: none), the cores online and
/// `available_parallelism` (quota and affinity applied).
fn quota_finding(quota: Option<f64>, online: usize, parallelism: usize) -> Finding {
    let cores = format!("{parallelism} of {online} cores available");
    let Some(q) = quota else {
        let value = format!("no quota; {cores}");
        return if parallelism < online {
            Finding::new("cpu-quota", Verdict::Info, value).detail(
                "this process may run on some cores only (affinity, cpuset): default workers \
                 follow that",
            )
        } else {
            Finding::new("cpu-quota", Verdict::Ok, value).detail("default workers: one per core")
        };
    };
    let value = format!("{q:.2} CPUs; {cores}");
    let throttled = "once the cgroup spends its quota, all its threads wait for the rest of the \
                     period (100 ms by default): pauses the latency includes";
    if q < 1.0 {
        Finding::new("cpu-quota", Verdict::Warn, value)
            .detail(format!(
                "less than one CPU: even one busy worker is throttled; {throttled}"
            ))
            .fix("a quota of whole CPUs at least (docker --cpus, resources.limits.cpu)")
    } else if q < online as f64 {
        Finding::new("cpu-quota", Verdict::Info, value)
            .detail(format!(
                "default workers fit the quota ({parallelism}), but {throttled} — with an \
                 embedded target or more --workers too"
            ))
            .fix(format!(
                "keep --workers at {} or fewer, or raise the quota (docker --cpus, \
                 resources.limits.cpu)",
                (q.floor() as usize).max(1)
            ))
    } else {
        Finding::new("cpu-quota", Verdict::Ok, value).detail("the quota covers every core")
    }
}

/// Busy time of the cores not ours, between two reads of /proc/stat (per core) with our own
/// CPU time over the same span (`own_ticks`, /proc/self/stat).
fn other_load_finding(before: &[CpuTimes], after: &[CpuTimes], own_ticks: u64) -> Finding {
    let deltas: Vec<CpuTimes> = before.iter().zip(after).map(|(b, a)| a.since(b)).collect();
    let total: u64 = deltas.iter().map(|d| d.total).sum();
    if deltas.is_empty() || total == 0 {
        return Finding::new("other-load", Verdict::Info, "not measured")
            .detail("/proc/stat gave no per-core times");
    }
    let busy: u64 = deltas.iter().map(|d| d.busy).sum();
    let steal: u64 = deltas.iter().map(|d| d.steal).sum();
    let other = busy.saturating_sub(own_ticks) as f64 / total as f64;
    let share = |d: &CpuTimes| {
        if d.total == 0 {
            0.0
        } else {
            d.busy as f64 / d.total as f64
        }
    };
    let mut per_core: Vec<(usize, f64)> = deltas.iter().map(share).enumerate().collect();
    let listed = if per_core.len() > 8 {
        per_core.sort_by(|a, b| b.1.total_cmp(&a.1));
        per_core.truncate(4);
        "busiest: "
    } else {
        ""
    };
    let cores = per_core
        .iter()
        .map(|(i, s)| format!("cpu{i} {:.0} %", s * 100.0))
        .collect::<Vec<_>>()
        .join(", ");
    let value = format!(
        "{:.0} % of {} cores ({listed}{cores})",
        other * 100.0,
        deltas.len()
    );
    let steal = if steal * 200 > total {
        format!(
            "; {:.0} % was steal (the hypervisor running other guests)",
            steal as f64 * 100.0 / total as f64
        )
    } else {
        String::new()
    };
    let why = format!("other work over a 1 s sample, ours taken out{steal}");
    if other > OTHER_LOAD_WARN {
        Finding::new("other-load", Verdict::Warn, value)
            .detail(format!(
                "{why}: it competes with the generator and the target for cores and caches, so \
                 latency and throughput move with it"
            ))
            .fix(
                "an idle machine, or cores set apart for the test (taskset -c, cpusets); `top` \
                 shows what runs",
            )
    } else {
        Finding::new("other-load", Verdict::Ok, value).detail(why)
    }
}

/// /proc/loadavg, with the cores online: context for the sample above.
fn loadavg_finding(loadavg: Option<[f64; 3]>, online: usize) -> Finding {
    let Some([one, five, fifteen]) = loadavg else {
        return Finding::new("load-average", Verdict::Info, "not exposed");
    };
    let value = format!("{one:.2} {five:.2} {fifteen:.2} ({online} cores)");
    let why = "tasks running or waiting, averaged over 1, 5 and 15 minutes";
    if one < 0.1 * online as f64 {
        Finding::new("load-average", Verdict::Ok, value).detail(why)
    } else {
        Finding::new("load-average", Verdict::Info, value).detail(format!(
            "{why}: something else has been running here (other-load says how much, now)"
        ))
    }
}

/// `net.core.somaxconn`: the longest accept queue a server on this machine can ask for.
fn somaxconn_finding(somaxconn: Option<u64>, users: u64) -> Finding {
    let Some(n) = somaxconn else {
        return Finding::new("somaxconn", Verdict::Info, "not exposed");
    };
    if n < users {
        Finding::new("somaxconn", Verdict::Info, n.to_string())
            .detail(format!(
                "a server on this machine queues at most {n} connections not yet accepted: \
                 {users} users connecting at once can meet dropped SYNs (1 s connects) — if the \
                 target runs here"
            ))
            .fix("sysctl -w net.core.somaxconn=65535")
    } else {
        Finding::new("somaxconn", Verdict::Ok, n.to_string())
            .detail("a local server can queue every connection planned")
    }
}

/// The transparent hugepages mode.
fn thp_finding(mode: Option<&str>) -> Finding {
    match mode {
        None => Finding::new("transparent-hugepages", Verdict::Info, "not exposed"),
        Some("always") => Finding::new("transparent-hugepages", Verdict::Info, "always")
            .detail(
                "huge pages for every process: compaction and khugepaged can stall an \
                 allocation now and then (rare latency spikes)",
            )
            .fix("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"),
        Some(m) => Finding::new("transparent-hugepages", Verdict::Ok, m)
            .detail("huge pages only where asked for"),
    }
}

/// Swap in use, from /proc/meminfo (kB).
fn swap_finding(total_kb: Option<u64>, free_kb: Option<u64>) -> Finding {
    let (Some(total), Some(free)) = (total_kb, free_kb) else {
        return Finding::new("swap", Verdict::Info, "not exposed");
    };
    let mib = |kb: u64| kb as f64 / 1024.0;
    if total == 0 {
        return Finding::new("swap", Verdict::Ok, "none").detail("nothing can be swapped out");
    }
    let used = total.saturating_sub(free);
    let value = format!("{:.0} MiB of {:.0} MiB in use", mib(used), mib(total));
    if used == 0 {
        Finding::new("swap", Verdict::Ok, value).detail("nothing is swapped out")
    } else {
        Finding::new("swap", Verdict::Info, value)
            .detail(
                "some memory is swapped out: if it is the generator's or the target's, touching \
                 it costs a disk read",
            )
            .fix("swapoff -a && swapon -a (brings it back, given free memory)")
    }
}

// ---------------------------------------------------------------------------------------------
// Parsers: pure functions of the files' text.

/// One core's times from /proc/stat, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct CpuTimes {
    /// Everything but idle and iowait.
    busy: u64,
    /// Given to other guests by the hypervisor (counted in `busy`).
    steal: u64,
    /// user + nice + system + idle + iowait + irq + softirq + steal (guest time is in user).
    total: u64,
}

impl CpuTimes {
    fn since(&self, before: &CpuTimes) -> CpuTimes {
        CpuTimes {
            busy: self.busy.saturating_sub(before.busy),
            steal: self.steal.saturating_sub(before.steal),
            total: self.total.saturating_sub(before.total),
        }
    }
}

/// The per-core lines of /proc/stat (`cpu0 …`, not the `cpu` total), in order.
fn parse_proc_stat(text: &str) -> Vec<CpuTimes> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let name = fields.next()?;
            let n = name.strip_prefix("cpu")?;
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let v: Vec<u64> = fields.take(8).map(|f| f.parse().unwrap_or(0)).collect();
            if v.len() < 4 {
                return None;
            }
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            let total: u64 = v.iter().sum();
            let idle = at(3) + at(4);
            Some(CpuTimes {
                busy: total - idle,
                steal: at(7),
                total,
            })
        })
        .collect()
}

/// utime + stime (clock ticks) from /proc/self/stat; the command name may hold spaces and
/// parentheses, so fields are counted after its last `)`.
fn parse_own_ticks(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the name: state is field 3; utime and stime are fields 14 and 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Sockets in TIME_WAIT (state `06`) in /proc/net/tcp or tcp6 (a header line, then one line
/// per socket: `sl local rem st …`).
fn count_time_wait(text: &str) -> u64 {
    text.lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(3) == Some("06"))
        .count() as u64
}

/// Where this process's cgroups are, from /proc/self/cgroup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Cgroups {
    /// The unified (v2) hierarchy's path (`0::/path`).
    unified: Option<String>,
    /// The v1 `cpu` controller's path (`N:cpu,cpuacct:/path`).
    cpu_v1: Option<String>,
}

fn parse_cgroup(text: &str) -> Cgroups {
    let mut out = Cgroups::default();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            out.unified = Some(path.to_string());
        } else if controllers.split(',').any(|c| c == "cpu") {
            out.cpu_v1 = Some(path.to_string());
        }
    }
    out
}

/// cgroup v2 `cpu.max` (`"max 100000"`: no quota; `"200000 100000"`: 2 CPUs); `Err` when
/// the text is not that.
fn parse_cpu_max(text: &str) -> Result<Option<f64>, String> {
    let mut it = text.split_whitespace();
    let bad = || format!("cpu.max: unexpected {text:?}");
    let quota = it.next().ok_or_else(bad)?;
    let period: f64 = match it.next() {
        Some(p) => p.parse().map_err(|_| bad())?,
        None => 100_000.0,
    };
    if it.next().is_some() || period <= 0.0 {
        return Err(bad());
    }
    if quota == "max" {
        return Ok(None);
    }
    let quota: f64 = quota.parse().map_err(|_| bad())?;
    Ok(Some(quota / period))
}

/// cgroup v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us` (quota -1: none).
fn parse_cfs(quota: &str, period: &str) -> Result<Option<f64>, String> {
    let bad = || format!("cpu.cfs_quota_us {quota:?}, cpu.cfs_period_us {period:?}");
    let q: i64 = quota.trim().parse().map_err(|_| bad())?;
    let p: f64 = period.trim().parse().map_err(|_| bad())?;
    if q < 0 {
        return Ok(None);
    }
    if p <= 0.0 {
        return Err(bad());
    }
    Ok(Some(q as f64 / p))
}

/// The first three numbers of /proc/loadavg.
fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(str::parse::<f64>);
    Some([it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?])
}

/// The bracketed choice of a sysfs mode file (`always [madvise] never` → `madvise`).
fn selected(text: &str) -> Option<&str> {
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(&text[start..end])
}

/// A `Key:   123 kB` line of /proc/meminfo.
fn meminfo_kb(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

// ---------------------------------------------------------------------------------------------
// Rendering.

/// Words of `text` in lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The table: one row per check; under each that is not ok, why and the fix.
pub fn render_text(r: &Report) -> String {
    use std::fmt::Write;
    let width = CHECKS.iter().map(|c| c.len()).max().unwrap_or(0) + 2;
    let mut out = format!("{:width$}{:9}value\n", "check", "verdict");
    let indent = " ".repeat(width + 9);
    for f in &r.findings {
        let _ = writeln!(out, "{:width$}{:9}{}", f.check, f.verdict.as_str(), f.value);
        if f.verdict != Verdict::Ok {
            for line in wrap(&f.detail, 100usize.saturating_sub(indent.len()).max(40)) {
                let _ = writeln!(out, "{indent}{line}");
            }
            if let Some(fix) = &f.fix {
                let _ = writeln!(out, "{indent}fix: {fix}");
            }
        }
    }
    let _ = match r.warnings() {
        0 => writeln!(
            out,
            "\nnothing found that would make measurements on this machine unreliable"
        ),
        n => writeln!(
            out,
            "\n{n} warning{}: measurements on this machine may be unreliable",
            if n == 1 { "" } else { "s" }
        ),
    };
    if r.quick {
        out.push_str("(--quick: the timer and the other load on the cores were not measured)\n");
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Reading and measuring (Linux).

#[cfg(target_os = "linux")]
mod linux {
    use std::time::{Duration, Instant};

    use super::*;

    fn read(path: &str) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }

    pub(super) fn examine(o: &Options) -> Vec<Finding> {
        let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());
        let stat = read("/proc/stat").unwrap_or_default();
        let online = parse_proc_stat(&stat).len().max(1);
        let range = limits::port_range();
        let time_wait = ["/proc/net/tcp", "/proc/net/tcp6"]
            .iter()
            .filter_map(|p| read(p))
            .map(|t| count_time_wait(&t))
            .reduce(|a, b| a + b);
        let need = limits::fds_for(o.concurrency, 1, parallelism);
        let quick = |check| {
            Finding::new(check, Verdict::Info, "not measured (--quick)")
                .detail("run without --quick to measure it")
        };
        let meminfo = read("/proc/meminfo").unwrap_or_default();
        vec![
            open_files_finding(
                o.soft_files_at_start,
                limits::open_files(),
                need,
                o.concurrency,
            ),
            ports_finding(range, time_wait, o.concurrency),
            tw_reuse_finding(limits::tw_reuse(), range),
            if o.quick {
                quick("timer")
            } else {
                let mut sleep = sleep_overshoots();
                sleep.sort();
                match timerfd_overshoots() {
                    Ok(mut fd) => {
                        fd.sort();
                        timer_finding(Some(&fd), &sleep)
                    }
                    Err(_) => timer_finding(None, &sleep),
                }
            },
            clock_finding(
                read("/sys/devices/system/clocksource/clocksource0/current_clocksource").as_deref(),
                read("/sys/devices/system/clocksource/clocksource0/available_clocksource")
                    .as_deref(),
                clock_read_ns(),
            ),
            governor_finding(&governors()),
            quota_finding(cpu_quota(), online, parallelism),
            if o.quick {
                quick("other-load")
            } else {
                sample_other_load()
            },
            loadavg_finding(
                read("/proc/loadavg").as_deref().and_then(parse_loadavg),
                online,
            ),
            somaxconn_finding(
                read("/proc/sys/net/core/somaxconn").and_then(|s| s.trim().parse().ok()),
                o.concurrency,
            ),
            thp_finding(
                read("/sys/kernel/mm/transparent_hugepage/enabled")
                    .as_deref()
                    .and_then(selected),
            ),
            swap_finding(
                meminfo_kb(&meminfo, "SwapTotal"),
                meminfo_kb(&meminfo, "SwapFree"),
            ),
        ]
    }

    /// Overshoots of blocking 50 µs sleeps on a timerfd, armed relative to now like the
    /// dispatcher's.
    fn timerfd_overshoots() -> std::io::Result<Vec<Duration>> {
        use rustix::time::{
            Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
            timerfd_settime,
        };
        let fd = timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::CLOEXEC)?;
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let value = Timespec {
            tv_sec: 0,
            tv_nsec: TIMER_SLEEP.as_nanos() as i64,
        };
        let mut out = Vec::with_capacity(TIMER_SLEEPS);
        let mut expirations = [0u8; 8];
        for _ in 0..TIMER_SLEEPS {
            let start = Instant::now();
            timerfd_settime(
                &fd,
                TimerfdTimerFlags::empty(),
                &Itimerspec {
                    it_interval: zero,
                    it_value: value,
                },
            )?;
            rustix::io::read(&fd, &mut expirations)?;
            out.push(start.elapsed().saturating_sub(TIMER_SLEEP));
        }
        Ok(out)
    }

    fn sleep_overshoots() -> Vec<Duration> {
        (0..TIMER_SLEEPS)
            .map(|_| {
                let start = Instant::now();
                std::thread::sleep(TIMER_SLEEP);
                start.elapsed().saturating_sub(TIMER_SLEEP)
            })
            .collect()
    }

    /// Nanoseconds per `Instant::now()`: a million reads, or as many as fit in 200 ms (a
    /// clocksource read by system call costs a microsecond or more).
    fn clock_read_ns() -> f64 {
        let start = Instant::now();
        let mut reads = 0u64;
        while reads < 1_000_000 && start.elapsed() < Duration::from_millis(200) {
            for _ in 0..1024 {
                std::hint::black_box(Instant::now());
            }
            reads += 1025;
        }
        start.elapsed().as_nanos() as f64 / reads as f64
    }

    /// Each core's `scaling_governor`, where cpufreq is exposed.
    fn governors() -> Vec<String> {
        let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu") else {
            return Vec::new();
        };
        let mut cpus: Vec<(u32, std::path::PathBuf)> = dir
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let n = name.strip_prefix("cpu")?.parse().ok()?;
                Some((n, e.path().join("cpufreq/scaling_governor")))
            })
            .collect();
        cpus.sort();
        cpus.iter()
            .filter_map(|(_, p)| std::fs::read_to_string(p).ok())
            .map(|g| g.trim().to_string())
            .collect()
    }

    /// The tightest CPU quota on this process's cgroup or its ancestors (v2), or of its v1
    /// `cpu` cgroup, in CPUs.
    fn cpu_quota() -> Option<f64> {
        let groups = parse_cgroup(&read("/proc/self/cgroup")?);
        let mut tightest: Option<f64> = None;
        let mut take = |q: Option<f64>| {
            if let Some(q) = q {
                tightest = Some(tightest.map_or(q, |t| t.min(q)));
            }
        };
        if let Some(path) = &groups.unified {
            let mut dir = std::path::PathBuf::from(format!("/sys/fs/cgroup{path}"));
            loop {
                if let Ok(text) = std::fs::read_to_string(dir.join("cpu.max")) {
                    take(parse_cpu_max(&text).ok().flatten());
                }
                if dir == std::path::Path::new("/sys/fs/cgroup") || !dir.pop() {
                    break;
                }
            }
        }
        if let Some(path) = &groups.cpu_v1 {
            for mount in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
                let dir = format!("{mount}{path}");
                if let (Some(q), Some(p)) = (
                    read(&format!("{dir}/cpu.cfs_quota_us")),
                    read(&format!("{dir}/cpu.cfs_period_us")),
                ) {
                    take(parse_cfs(&q, &p).ok().flatten());
                    break;
                }
            }
        }
        tightest
    }

    /// Two reads of /proc/stat 1 s apart, our own CPU time over the same second taken out.
    fn sample_other_load() -> Finding {
        let own = || read("/proc/self/stat").as_deref().and_then(parse_own_ticks);
        let (before, own_before) = (
            parse_proc_stat(&read("/proc/stat").unwrap_or_default()),
            own(),
        );
        std::thread::sleep(Duration::from_secs(1));
        let (after, own_after) = (
            parse_proc_stat(&read("/proc/stat").unwrap_or_default()),
            own(),
        );
        let ours = own_after
            .zip(own_before)
            .map_or(0, |(a, b)| a.saturating_sub(b));
        other_load_finding(&before, &after, ours)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn port_ranges_parse_from_the_sysctl_text() {
        assert_eq!(
            limits::parse_port_range("32768\t60999\n"),
            Some((32768, 60999))
        );
        assert_eq!(limits::parse_port_range("1024 65535"), Some((1024, 65535)));
        assert_eq!(limits::parse_port_range("60999 32768"), None);
        assert_eq!(limits::parse_port_range("32768"), None);
        assert_eq!(limits::parse_port_range("a b"), None);
    }

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:A819 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 128531 1 000000000ceb59f6 100 0 0 10 0
   1: 0100007F:1F90 0100007F:C350 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
   2: 0100007F:1F90 0100007F:C352 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
   3: 0100007F:C354 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 20 4 30 10 -1
";

    #[test]
    fn time_wait_sockets_are_counted_by_state_06() {
        assert_eq!(count_time_wait(TCP), 2);
        // The header alone (an empty tcp6), and a header whose `st` column is not a socket.
        assert_eq!(count_time_wait(TCP.lines().next().unwrap()), 0);
        let tcp6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:D2F0 06 00000000:00000000 03:000016A8 00000000     0        0 0 3 0000000000000000
";
        assert_eq!(count_time_wait(tcp6), 1);
    }

    const STAT_1: &str = "cpu  243553 0 68012 211775 1031 0 24264 375 0 0
cpu0 100 0 50 800 50 0 0 0 0 0
cpu1 300 0 100 550 20 0 30 0 40 0
intr 12191384 0 0
ctxt 46228820
cpu_not_a_core 1 2 3 4
";
    const STAT_2: &str = "cpu  243553 0 68012 211775 1031 0 24264 375 0 0
cpu0 110 0 56 884 50 0 0 0 0 0
cpu1 360 0 120 560 20 0 30 10 60 0
";

    #[test]
    fn proc_stat_gives_each_core_busy_idle_and_steal() {
        let cores = parse_proc_stat(STAT_1);
        assert_eq!(cores.len(), 2, "per-core lines only, not the total");
        // Busy: everything but idle and iowait; guest time (in user already) not added twice.
        assert_eq!(
            cores[0],
            CpuTimes {
                busy: 150,
                steal: 0,
                total: 1000
            }
        );
        assert_eq!(
            cores[1],
            CpuTimes {
                busy: 430,
                steal: 0,
                total: 1000
            }
        );
        assert!(parse_proc_stat("intr 1 2 3\n").is_empty());
    }

    #[test]
    fn other_load_is_the_busy_share_not_ours_and_warns_past_a_tenth() {
        let (b, a) = (parse_proc_stat(STAT_1), parse_proc_stat(STAT_2));
        // Deltas: cpu0 16 busy of 100, cpu1 90 busy (10 steal) of 100: 106 of 200 busy.
        let f = other_load_finding(&b, &a, 0);
        assert_eq!(f.verdict, Verdict::Warn, "{f:?}");
        assert!(f.value.starts_with("53 % of 2 cores"), "{}", f.value);
        assert!(f.value.contains("cpu0 16 %, cpu1 90 %"), "{}", f.value);
        assert!(f.detail.contains("5 % was steal"), "{}", f.detail);
        assert!(f.fix.is_some());
        // Our own 96 ticks taken out: 10 of 200 is 5 %, under the bar.
        let ours = other_load_finding(&b, &a, 96);
        assert_eq!(ours.verdict, Verdict::Ok, "{ours:?}");
        assert!(ours.value.starts_with("5 % of 2 cores"), "{}", ours.value);
        // Nothing to compare.
        assert_eq!(other_load_finding(&[], &[], 0).verdict, Verdict::Info);
    }

    #[test]
    fn own_cpu_time_is_read_past_a_command_name_with_spaces_and_parens() {
        let stat = "4242 (mc (bench) x) S 1 4242 4242 0 -1 4194560 300 0 0 0 17 5 0 0 20 0 3 0 \
                    100 1000000 200 18446744073709551615";
        assert_eq!(parse_own_ticks(stat), Some(22));
        assert_eq!(parse_own_ticks("4242 (x) S 1 2"), None);
    }

    #[test]
    fn cgroup_paths_cpu_max_and_cfs_quota_parse() {
        let v2 = parse_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n");
        assert_eq!(
            v2.unified.as_deref(),
            Some("/user.slice/user-1000.slice/session-2.scope")
        );
        assert_eq!(v2.cpu_v1, None);
        let v1 = parse_cgroup(
            "9:name=systemd:/\n4:memory:/a/b\n3:cpu,cpuacct:/docker/abc\n1:cpuset:/\n0::/\n",
        );
        assert_eq!(v1.cpu_v1.as_deref(), Some("/docker/abc"));
        assert_eq!(v1.unified.as_deref(), Some("/"));
        // `cpuacct` or `cpuset` alone is not the `cpu` controller.
        assert_eq!(parse_cgroup("2:cpuacct:/x\n1:cpuset:/y\n").cpu_v1, None);

        assert_eq!(parse_cpu_max("max 100000\n"), Ok(None));
        assert_eq!(parse_cpu_max("200000 100000\n"), Ok(Some(2.0)));
        assert_eq!(parse_cpu_max("50000 100000"), Ok(Some(0.5)));
        assert_eq!(parse_cpu_max("max"), Ok(None));
        assert!(parse_cpu_max("").is_err());
        assert!(parse_cpu_max("lots 100000").is_err());
        assert!(parse_cpu_max("100000 0").is_err());

        assert_eq!(parse_cfs("-1\n", "100000\n"), Ok(None));
        assert_eq!(parse_cfs("150000\n", "100000\n"), Ok(Some(1.5)));
        assert!(parse_cfs("x", "100000").is_err());
    }

    #[test]
    fn governors_other_than_performance_warn_and_none_exposed_is_info() {
        let all =
            |g: &[&str]| governor_finding(&g.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let ok = all(&["performance\n", "performance"]);
        assert_eq!(
            (ok.verdict, ok.value.as_str()),
            (Verdict::Ok, "performance (2 cores)")
        );
        let mixed = all(&["powersave", "performance", "powersave"]);
        assert_eq!(mixed.verdict, Verdict::Warn);
        assert_eq!(mixed.value, "powersave (2 cores), performance (1 core)");
        assert!(mixed.fix.as_deref().unwrap().contains("performance"));
        assert_eq!(all(&["schedutil"]).verdict, Verdict::Warn);
        let vm = all(&[]);
        assert_eq!(
            (vm.verdict, vm.value.as_str()),
            (Verdict::Info, "not exposed")
        );
    }

    #[test]
    fn quotas_below_one_cpu_warn_and_partial_ones_say_how_many_workers_fit() {
        assert_eq!(quota_finding(None, 8, 8).verdict, Verdict::Ok);
        assert_eq!(quota_finding(None, 8, 2).verdict, Verdict::Info);
        let half = quota_finding(Some(0.5), 8, 1);
        assert_eq!(half.verdict, Verdict::Warn);
        assert!(half.value.starts_with("0.50 CPUs"), "{}", half.value);
        let some = quota_finding(Some(2.5), 8, 2);
        assert_eq!(some.verdict, Verdict::Info);
        assert!(some.fix.as_deref().unwrap().contains("--workers at 2"));
        assert_eq!(quota_finding(Some(8.0), 8, 8).verdict, Verdict::Ok);
    }

    #[test]
    fn the_open_file_limit_counts_after_mcpbench_raises_it() {
        // Raised from 1024 to a hard limit that fits: worth knowing, not a warning.
        let raised = open_files_finding(1024, (524288, Some(524288)), 1072, 1000);
        assert_eq!(raised.verdict, Verdict::Info);
        assert!(
            raised
                .value
                .contains("soft 1024 (raised to 524288 at start)")
        );
        // The hard limit itself too low: a run this size is refused.
        let low = open_files_finding(64, (64, Some(64)), 1072, 1000);
        assert_eq!(low.verdict, Verdict::Warn);
        assert_eq!(
            low.value,
            "soft 64, hard 64; 1000 connections need about 1072"
        );
        assert!(low.detail.contains("1072 descriptors"), "{}", low.detail);
        assert!(low.fix.as_deref().unwrap().starts_with("ulimit -n 65536"));
        let big = open_files_finding(20000, (20000, None), 1072, 1000);
        assert_eq!(big.verdict, Verdict::Ok);
        assert!(
            big.value.starts_with("soft 20000, hard unlimited;"),
            "{}",
            big.value
        );
    }

    #[test]
    fn ports_warn_when_the_load_or_time_wait_fills_the_range() {
        let range = Some((32768, 60999));
        let ok = ports_finding(range, Some(3), 1000);
        assert_eq!(ok.verdict, Verdict::Ok);
        assert_eq!(
            ok.value,
            "28232 ports (32768–60999), 3 sockets in TIME_WAIT"
        );
        let too_many = ports_finding(range, Some(0), 30000);
        assert_eq!(too_many.verdict, Verdict::Warn);
        assert!(
            too_many
                .fix
                .as_deref()
                .unwrap()
                .contains("ip_local_port_range")
        );
        let churned = ports_finding(range, Some(28000), 1000);
        assert_eq!(churned.verdict, Verdict::Warn);
        assert!(
            churned.detail.contains("about 232 ports"),
            "{}",
            churned.detail
        );
        assert_eq!(ports_finding(None, None, 1).verdict, Verdict::Info);
    }

    #[test]
    fn time_wait_reuse_gives_the_churn_the_range_sustains() {
        let range = Some((32768, 60999));
        assert_eq!(tw_reuse_finding(Some(1), range).verdict, Verdict::Ok);
        let loopback = tw_reuse_finding(Some(2), range);
        assert_eq!(loopback.verdict, Verdict::Info);
        // Half of 28232 ports over 60 s.
        assert!(
            loopback
                .detail
                .starts_with("to a remote target, new connections faster than about 235/s"),
            "{}",
            loopback.detail
        );
        assert_eq!(
            loopback.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_tw_reuse=1")
        );
        let off = tw_reuse_finding(Some(0), range);
        assert!(off.detail.starts_with("new connections"), "{}", off.detail);
    }

    #[test]
    fn timer_overshoot_p99_past_200us_warns() {
        let mut fast: Vec<Duration> = (0..200).map(|i| us(i % 20)).collect();
        fast.sort();
        let f = timer_finding(Some(&fast), &fast);
        assert_eq!(f.verdict, Verdict::Ok, "{f:?}");
        assert_eq!(f.value, "timerfd overshoot p50 9 µs, p99 19 µs");
        assert!(f.detail.contains("200 sleeps of 50 µs"), "{}", f.detail);
        // Three in a hundred late by a millisecond: p50 fine, p99 not.
        let mut slow = fast.clone();
        for d in slow.iter_mut().take(6) {
            *d = us(1000);
        }
        slow.sort();
        let s = timer_finding(Some(&slow), &fast);
        assert_eq!(s.verdict, Verdict::Warn, "{s:?}");
        assert!(s.value.ends_with("p99 1000 µs"), "{}", s.value);
        assert!(s.fix.is_some());
        assert_eq!(timer_finding(None, &fast).verdict, Verdict::Info);
        assert_eq!(quantile(&[], 0.5), Duration::ZERO);
        assert_eq!(quantile(&[us(1), us(2), us(3), us(4)], 0.5), us(2));
    }

    #[test]
    fn slow_clock_reads_warn_with_the_clocksource_to_switch_to() {
        assert_eq!(
            clock_finding(Some("tsc\n"), None, 20.0).verdict,
            Verdict::Ok
        );
        assert_eq!(
            clock_finding(Some("kvm-clock\n"), None, 40.0).verdict,
            Verdict::Info
        );
        let hpet = clock_finding(Some("hpet\n"), Some("tsc hpet acpi_pm\n"), 1500.0);
        assert_eq!(hpet.verdict, Verdict::Warn);
        assert_eq!(hpet.value, "hpet, Instant::now 1500 ns");
        assert!(hpet.fix.as_deref().unwrap().starts_with("echo tsc >"));
        let xen = clock_finding(Some("xen"), Some("xen"), 900.0);
        assert!(!xen.fix.as_deref().unwrap().starts_with("echo tsc"));
    }

    #[test]
    fn small_files_parse_loadavg_thp_meminfo() {
        assert_eq!(
            parse_loadavg("2.28 2.03 1.82 3/105 23633\n"),
            Some([2.28, 2.03, 1.82])
        );
        assert_eq!(parse_loadavg("2.28"), None);
        assert_eq!(selected("always [madvise] never\n"), Some("madvise"));
        assert_eq!(selected("always madvise never"), None);
        let meminfo = "MemTotal:  8000000 kB\nSwapCached: 0 kB\nSwapTotal: 2097152 kB\nSwapFree: 1048576 kB\n";
        assert_eq!(meminfo_kb(meminfo, "SwapTotal"), Some(2_097_152));
        assert_eq!(meminfo_kb(meminfo, "SwapFree"), Some(1_048_576));
        assert_eq!(meminfo_kb(meminfo, "Swap"), None);
        let swap = swap_finding(Some(2_097_152), Some(1_048_576));
        assert_eq!(
            (swap.verdict, swap.value.as_str()),
            (Verdict::Info, "1024 MiB of 2048 MiB in use")
        );
        assert_eq!(swap_finding(Some(0), Some(0)).value, "none");
        assert_eq!(thp_finding(Some("always")).verdict, Verdict::Info);
        assert_eq!(thp_finding(Some("madvise")).verdict, Verdict::Ok);
        assert_eq!(somaxconn_finding(Some(128), 1000).verdict, Verdict::Info);
        assert_eq!(somaxconn_finding(Some(4096), 1000).verdict, Verdict::Ok);
        assert_eq!(
            loadavg_finding(Some([0.0, 0.1, 0.1]), 2).verdict,
            Verdict::Ok
        );
        assert_eq!(
            loadavg_finding(Some([2.28, 2.0, 1.8]), 2).verdict,
            Verdict::Info
        );
    }

    #[test]
    fn the_table_shows_why_and_the_fix_under_each_finding_not_ok() {
        let r = Report {
            schema_version: 1,
            concurrency: 1000,
            quick: false,
            findings: vec![
                open_files_finding(64, (64, Some(64)), 1072, 1000),
                ports_finding(Some((32768, 60999)), Some(0), 1000),
            ],
        };
        let text = render_text(&r);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("check")
                && lines[0].contains("verdict")
                && lines[0].ends_with("value")
        );
        assert!(
            lines[1].starts_with("open-files") && lines[1].contains(" warn "),
            "{text}"
        );
        assert!(text.contains("fix: ulimit -n 65536"), "{text}");
        let ports = lines
            .iter()
            .position(|l| l.starts_with("ephemeral-ports"))
            .unwrap();
        assert!(lines[ports].contains(" ok "), "{text}");
        // An ok finding has no detail lines under it.
        assert_eq!(lines[ports + 1], "");
        assert!(
            text.ends_with("1 warning: measurements on this machine may be unreliable\n"),
            "{text}"
        );
        assert!(
            lines
                .iter()
                .all(|l| l.chars().count() <= 110 || l.contains("fix:")),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["findings"][0]["verdict"], "warn");
        assert_eq!(json["findings"][1]["fix"], serde_json::Value::Null);
        assert_eq!(json["schema_version"], 1);
    }

    #[test]
    fn wrapping_keeps_words_whole() {
        assert_eq!(wrap("aa bb cc dd", 5), ["aa bb", "cc dd"]);
        assert_eq!(wrap("", 5), Vec::<String>::new());
        assert_eq!(wrap("toolongword x", 5), ["toolongword", "x"]);
    }
}
