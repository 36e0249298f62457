//! The target's own resources — CPU time, resident memory, open descriptors, threads — read
//! from procfs once per interval by the collector: for processes named by pid (`target.pid`,
//! `--target-pid`: a gateway and its upstreams) and for the stdio servers the generator spawned
//! itself. Never per request: a few small reads per process per interval.
//!
//! CPU time comes from `/proc/PID/stat` (utime + stime, in clock ticks: 10 ms on most
//! kernels, so a figure over a whole run is exact to a few ticks); memory is the resident set
//! (`rss` pages of the same line); descriptors are the entries of `/proc/PID/fd`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One process's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// User + system CPU time since the process started.
    pub cpu: Duration,
    pub rss_bytes: u64,
    pub fds: u64,
    pub threads: u64,
}

/// The target at the end of one interval, summed over its processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TargetSample {
    /// CPU time the target's processes used during the interval.
    pub cpu: Duration,
    pub rss_bytes: u64,
    pub fds: u64,
    pub threads: u64,
    /// Processes read (alive).
    pub processes: u64,
}

/// Pids of the stdio servers a run spawned, registered as they start (a rare event, not the
/// hot path); shared by the sessions of every worker and the collector.
#[derive(Debug, Clone, Default)]
pub struct Children(Arc<Mutex<Vec<u32>>>);

impl Children {
    pub fn push(&self, pid: u32) {
        if let Ok(mut v) = self.0.lock() {
            v.push(pid);
        }
    }

    fn pids(&self) -> Vec<u32> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// What the summary says of one watched process (or of the spawned stdio servers together).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TargetProcess {
    /// `pid 1234 (comm)`, or `stdio servers (N processes)`.
    pub name: String,
    /// CPU time used while the run was watching (user + system).
    pub cpu_seconds: f64,
    /// That CPU time per request the run started (warm-up included): what serving one request
    /// cost the target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_request: Option<f64>,
    /// Resident memory at the first and the last sample, and its peak.
    pub rss_first_bytes: u64,
    pub rss_last_bytes: u64,
    pub rss_peak_bytes: u64,
    pub fds_max: u64,
    pub threads_max: u64,
    /// The process could no longer be read before the run ended (it exited).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exited: bool,
}

impl TargetProcess {
    /// Sets the CPU time per request for a run that started `requests`.
    pub fn per_request(mut self, requests: u64) -> Self {
        self.cpu_us_per_request = (requests > 0)
            .then(|| (self.cpu_seconds * 1e6 / requests as f64 * 100.0).round() / 100.0);
        self
    }

    /// Resident memory growth from the first sample to the last (negative: it shrank).
    pub fn rss_growth_bytes(&self) -> i64 {
        self.rss_last_bytes as i64 - self.rss_first_bytes as i64
    }
}

/// Watched processes and their history.
#[derive(Debug, Default)]
pub struct Sampler {
    /// Named pids, each its own row.
    named: Vec<Watched>,
    /// Spawned stdio servers: one row for all of them, by pid.
    children: Option<(Children, BTreeMap<u32, Watched>)>,
    ticks_per_second: u64,
    page_size: u64,
}

#[derive(Debug)]
struct Watched {
    pid: u32,
    comm: String,
    first: Option<Usage>,
    last: Option<Usage>,
    peak_rss: u64,
    max_fds: u64,
    max_threads: u64,
    exited: bool,
}

impl Watched {
    fn new(pid: u32) -> Self {
        Watched {
            pid,
            comm: String::new(),
            first: None,
            last: None,
            peak_rss: 0,
            max_fds: 0,
            max_threads: 0,
            exited: false,
        }
    }

    /// Reads the process now; its CPU time since the previous read (none: gone or unreadable).
    fn sample(&mut self, ticks: u64, page: u64) -> Option<(Duration, Usage)> {
        if self.exited {
            return None;
        }
        let Some((comm, u)) = read(self.pid, ticks, page) else {
            // Seen before and gone now: exited (a pid never seen is reported as unreadable).
            self.exited = self.last.is_some();
            return None;
        };
        if self.comm.is_empty() {
            self.comm = comm;
        }
        let delta = self
            .last
            .map_or(Duration::ZERO, |l| u.cpu.saturating_sub(l.cpu));
        self.first.get_or_insert(u);
        self.last = Some(u);
        self.peak_rss = self.peak_rss.max(u.rss_bytes);
        self.max_fds = self.max_fds.max(u.fds);
        self.max_threads = self.max_threads.max(u.threads);
        Some((delta, u))
    }

    fn cpu(&self) -> Duration {
        match (self.first, self.last) {
            (Some(f), Some(l)) => l.cpu.saturating_sub(f.cpu),
            _ => Duration::ZERO,
        }
    }
}

impl Sampler {
    /// Watches `pids`, and the stdio servers registered in `children` if given. `None` when
    /// there is nothing to watch or no procfs here.
    pub fn new(pids: &[u32], children: Option<Children>) -> Option<Self> {
        if (pids.is_empty() && children.is_none()) || !cfg!(target_os = "linux") {
            return None;
        }
        let mut s = Sampler {
            named: pids.iter().map(|&p| Watched::new(p)).collect(),
            children: children.map(|c| (c, BTreeMap::new())),
            ticks_per_second: clock_ticks(),
            page_size: page_size(),
        };
        // A first reading, so that the first interval's CPU is its own.
        s.sample();
        Some(s)
    }

    /// Pids given that cannot be read now (no such process, or not ours to read).
    pub fn unreadable(pids: &[u32]) -> Vec<u32> {
        pids.iter()
            .copied()
            .filter(|&p| read(p, clock_ticks(), page_size()).is_none())
            .collect()
    }

    /// Reads every watched process: the target's use since the previous sample.
    pub fn sample(&mut self) -> TargetSample {
        let (ticks, page) = (self.ticks_per_second, self.page_size);
        let mut out = TargetSample::default();
        let mut add = |got: Option<(Duration, Usage)>| {
            if let Some((d, u)) = got {
                out.cpu += d;
                out.rss_bytes += u.rss_bytes;
                out.fds += u.fds;
                out.threads += u.threads;
                out.processes += 1;
            }
        };
        for w in &mut self.named {
            add(w.sample(ticks, page));
        }
        if let Some((registry, seen)) = &mut self.children {
            for pid in registry.pids() {
                seen.entry(pid).or_insert_with(|| Watched::new(pid));
            }
            for w in seen.values_mut() {
                add(w.sample(ticks, page));
            }
        }
        out
    }

    /// The summary's rows: one per named process, one for the spawned stdio servers (CPU per
    /// request left to [`TargetProcess::per_request`]).
    pub fn processes(&self) -> Vec<TargetProcess> {
        let mut rows: Vec<TargetProcess> = self
            .named
            .iter()
            .map(|w| TargetProcess {
                name: match w.comm.is_empty() {
                    true => format!("pid {} (unreadable)", w.pid),
                    false => format!("pid {} ({})", w.pid, w.comm),
                },
                cpu_seconds: w.cpu().as_secs_f64(),
                cpu_us_per_request: None,
                rss_first_bytes: w.first.map_or(0, |u| u.rss_bytes),
                rss_last_bytes: w.last.map_or(0, |u| u.rss_bytes),
                rss_peak_bytes: w.peak_rss,
                fds_max: w.max_fds,
                threads_max: w.max_threads,
                exited: w.exited,
            })
            .collect();
        if let Some((_, seen)) = self.children.as_ref().filter(|(_, s)| !s.is_empty()) {
            // Resident memory of the servers alive at once: sums at the first and last sample.
            let cpu: Duration = seen.values().map(Watched::cpu).sum();
            let alive_last = |w: &&Watched| !w.exited;
            rows.push(TargetProcess {
                name: match seen.len() {
                    1 => "stdio servers (1 process)".to_string(),
                    n => format!("stdio servers ({n} processes)"),
                },
                cpu_seconds: cpu.as_secs_f64(),
                cpu_us_per_request: None,
                rss_first_bytes: seen
                    .values()
                    .filter_map(|w| w.first)
                    .map(|u| u.rss_bytes)
                    .sum(),
                rss_last_bytes: seen
                    .values()
                    .filter(alive_last)
                    .filter_map(|w| w.last)
                    .map(|u| u.rss_bytes)
                    .sum(),
                rss_peak_bytes: seen.values().map(|w| w.peak_rss).sum(),
                fds_max: seen.values().map(|w| w.max_fds).sum(),
                threads_max: seen.values().map(|w| w.max_threads).sum(),
                exited: seen.values().all(|w| w.exited),
            });
        }
        rows
    }
}

/// `comm` and the counters of process `pid`, or `None` when it cannot be read.
fn read(pid: u32, ticks: u64, page: u64) -> Option<(String, Usage)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let s = parse_stat(&stat)?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    let ticks = ticks.max(1);
    let cpu = Duration::from_secs(s.cpu_ticks / ticks)
        + Duration::from_nanos((s.cpu_ticks % ticks) * 1_000_000_000 / ticks);
    Some((
        s.comm,
        Usage {
            cpu,
            rss_bytes: s.rss_pages * page,
            fds,
            threads: s.threads,
        },
    ))
}

#[derive(Debug, PartialEq, Eq)]
struct Stat {
    comm: String,
    cpu_ticks: u64,
    threads: u64,
    rss_pages: u64,
}

/// `/proc/PID/stat`: `pid (comm) state ppid …`; comm may hold spaces and parentheses, so the
/// fields are counted from the last `)`. utime and stime are fields 14 and 15, num_threads 20,
/// rss 24 (proc(5)).
fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    // Field 3 (state) is the first after the comm.
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { rest.get(n - 3)?.parse().ok() };
    Some(Stat {
        comm,
        cpu_ticks: field(14)? + field(15)?,
        threads: field(20)?,
        rss_pages: field(24)?,
    })
}

fn clock_ticks() -> u64 {
    #[cfg(target_os = "linux")]
    {
        rustix::param::clock_ticks_per_second()
    }
    #[cfg(not(target_os = "linux"))]
    {
        100
    }
}

fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let line = "4242 (my (odd) server) S 1 4242 4242 0 -1 4194560 1200 0 3 0 250 75 0 0 20 0 7 0 \
                    123456 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                comm: "my (odd) server".into(),
                cpu_ticks: 325,
                threads: 7,
                rss_pages: 2560,
            })
        );
        assert_eq!(parse_stat("4242 (short) S 1 2"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_read_and_an_absent_one_is_not() {
        let me = std::process::id();
        let (_, u) = read(me, clock_ticks(), page_size()).expect("our own /proc entry");
        assert!(u.rss_bytes > 1 << 20, "{u:?}");
        assert!(u.threads >= 1 && u.fds >= 3, "{u:?}");
        // Pids are at most 2^22 on Linux.
        assert_eq!(Sampler::unreadable(&[me, 1 << 23]), vec![1 << 23]);
        // Burn some CPU: the sampler sees it as this interval's.
        let mut s = Sampler::new(&[me], None).expect("linux");
        // Until /proc says this process used 60 ms more (however busy the machine is).
        let cpu = || {
            read(me, clock_ticks(), page_size())
                .expect("readable")
                .1
                .cpu
        };
        let start = cpu();
        let mut x = 0u64;
        while cpu() < start + Duration::from_millis(60) {
            for _ in 0..100_000 {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
        }
        std::hint::black_box(x);
        let got = s.sample();
        assert!(got.cpu >= Duration::from_millis(50), "{got:?}");
        assert_eq!(got.processes, 1);
        let rows = s.processes();
        assert_eq!(rows.len(), 1);
        let row = rows[0].clone().per_request(1000);
        assert!(row.cpu_us_per_request.unwrap() >= 50.0, "{row:?}");
        assert!(rows[0].name.starts_with(&format!("pid {me} (")));
    }

    #[test]
    fn spawned_servers_are_one_row_and_exits_are_noticed() {
        let children = Children::default();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        children.push(child.id());
        let mut s = Sampler::new(&[], Some(children)).expect("linux");
        assert_eq!(s.sample().processes, 1);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(s.sample().processes, 0);
        let rows = s.processes();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].name, "stdio servers (1 process)");
        assert!(rows[0].exited && rows[0].threads_max >= 1, "{rows:?}");
    }
}
