//! The findings, each a pure function of what was read or measured: the verdict, why, and the
//! fix.

use std::time::Duration;

use super::procfs::CpuTimes;
use super::{Finding, TIMER_SLEEP, Verdict};
use crate::driver::limits;

/// A timer overshoot p99 past this shows up in open-loop latency.
const TIMER_P99_WARN: Duration = Duration::from_micros(200);
/// A clock read costing more than this (ns) is a syscall, not the vDSO.
const CLOCK_READ_WARN_NS: f64 = 200.0;
/// Other work on the cores past this share of the CPU makes measurements noisy.
const OTHER_LOAD_WARN: f64 = 0.10;

/// A limit as shown: the number, or `unlimited`.
pub(super) fn limit(n: u64) -> String {
    if n == u64::MAX {
        "unlimited".into()
    } else {
        n.to_string()
    }
}

/// The open-file limit against the descriptors `concurrency` connections need. mcpbench raises
/// the soft limit to the hard one at start, so what counts is the limit after that (`now`).
pub(super) fn open_files_finding(
    at_start: u64,
    now: (u64, Option<u64>),
    need: u64,
    users: u64,
) -> Finding {
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
pub(super) fn ports_finding(
    range: Option<(u64, u64)>,
    time_wait: Option<u64>,
    users: u64,
) -> Finding {
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
pub(super) fn tw_reuse_finding(setting: Option<u8>, range: Option<(u64, u64)>) -> Finding {
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
pub(super) fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A duration in microseconds, as shown.
pub(super) fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// Overshoots of 50 µs sleeps: on the timerfd (what the open loop dispatches on) and with
/// `std::thread::sleep` (with timer slack), both sorted. `None`: not measured.
pub(super) fn timer_finding(timerfd: Option<&[Duration]>, sleep: &[Duration]) -> Finding {
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
pub(super) fn clock_finding(
    source: Option<&str>,
    available: Option<&str>,
    ns_per_read: f64,
) -> Finding {
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
pub(super) fn governor_finding(governors: &[String]) -> Finding {
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
pub(super) fn quota_finding(quota: Option<f64>, online: usize, parallelism: usize) -> Finding {
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
pub(super) fn other_load_finding(
    before: &[CpuTimes],
    after: &[CpuTimes],
    own_ticks: u64,
) -> Finding {
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
pub(super) fn loadavg_finding(loadavg: Option<[f64; 3]>, online: usize) -> Finding {
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
pub(super) fn somaxconn_finding(somaxconn: Option<u64>, users: u64) -> Finding {
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
pub(super) fn thp_finding(mode: Option<&str>) -> Finding {
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
pub(super) fn swap_finding(total_kb: Option<u64>, free_kb: Option<u64>) -> Finding {
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
