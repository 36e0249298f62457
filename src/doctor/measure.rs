//! Reading and measuring on Linux: the files read, the timer, clock reads and a sample of the
//! cores' load taken, and each turned into its finding.

use std::time::{Duration, Instant};

use super::findings::*;
use super::procfs::*;
use super::{Finding, Options, TIMER_SLEEP, TIMER_SLEEPS, Verdict};
use crate::driver::limits;

/// A file's text; `None` if it cannot be read.
fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Every check, in the order of [`super::CHECKS`]: read, measured (unless --quick), judged.
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
            read("/sys/devices/system/clocksource/clocksource0/available_clocksource").as_deref(),
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

/// Overshoots of 50 µs `std::thread::sleep`s (timer slack included), in the order taken.
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
