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
    /// User + system CPU time of its waited-for (exited and reaped) children.
    pub children_cpu: Duration,
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

impl TargetSample {
    fn add(&mut self, cpu: Duration, u: Usage) {
        self.cpu += cpu;
        self.rss_bytes += u.rss_bytes;
        self.fds += u.fds;
        self.threads += u.threads;
        self.processes += 1;
    }
}

/// The target's resident memory against the sessions the run had opened, one point per
/// interval, folded into a least-squares line as it comes (Welford's co-moments: constant
/// memory however long the run, and no cancellation however large the sums).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SessionFit {
    /// Points added.
    pub points: u64,
    /// Sessions opened by the first point and by the last.
    pub first_sessions: u64,
    pub last_sessions: u64,
    mean_x: f64,
    mean_y: f64,
    /// Σ (x − x̄)² and Σ (x − x̄)(y − ȳ).
    sxx: f64,
    sxy: f64,
}

impl SessionFit {
    /// One point: `sessions` opened by now, the watched processes' `rss` now.
    pub fn add(&mut self, sessions: u64, rss: u64) {
        let (x, y) = (sessions as f64, rss as f64);
        if self.points == 0 {
            self.first_sessions = sessions;
        }
        self.last_sessions = sessions;
        self.points += 1;
        let n = self.points as f64;
        let dx = x - self.mean_x;
        self.mean_x += dx / n;
        self.mean_y += (y - self.mean_y) / n;
        self.sxx += dx * (x - self.mean_x);
        self.sxy += dx * (y - self.mean_y);
    }

    /// The line's slope, bytes per session; `None` while the sessions have not moved.
    pub fn slope(&self) -> Option<f64> {
        (self.sxx > 0.0).then(|| self.sxy / self.sxx)
    }
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

    /// The pids registered since the last take.
    fn take(&self) -> Vec<u32> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

/// The stdio servers a run spawned, as one row. Those that exited are folded into totals and
/// forgotten, so that session churn (a server per request) keeps memory and the per-interval
/// work bounded by the servers alive at once.
#[derive(Debug, Default)]
struct Spawned {
    registry: Children,
    alive: BTreeMap<u32, Watched>,
    /// Servers seen in all.
    count: u64,
    /// CPU time of those that exited and were reaped: what this process's waited-for
    /// children used (`cutime + cstime`) since the run started — exact even for servers too
    /// short-lived for any sample to see (a cold start per request).
    exited_cpu: Duration,
    /// That counter at the last sample (`None` before the first).
    reaped: Option<Duration>,
    /// The servers alive together: their resident memory at the first and last sample that
    /// found any, and the peaks of their sums.
    rss_first: Option<u64>,
    rss_last: u64,
    rss_peak: u64,
    fds_max: u64,
    threads_max: u64,
}

impl Spawned {
    fn sample(&mut self, ticks: u64, page: u64) -> TargetSample {
        for pid in self.registry.take() {
            // Started during the run: all its CPU time is the run's.
            let mut w = Watched::new(pid);
            w.from_zero = true;
            self.alive.insert(pid, w);
            self.count += 1;
        }
        let mut out = TargetSample::default();
        for w in self.alive.values_mut() {
            if let Some((d, u)) = w.sample(ticks, page) {
                out.add(d, u);
            }
        }
        // Servers reaped since the last sample: their whole CPU time moved to this process's
        // children counter, the part samples saw (up to their last) already counted.
        let reaped =
            read(std::process::id(), ticks, page).map_or(Duration::ZERO, |(_, u)| u.children_cpu);
        let gained = self
            .reaped
            .map_or(Duration::ZERO, |r| reaped.saturating_sub(r));
        self.reaped = Some(reaped);
        let mut seen = Duration::ZERO;
        self.alive.retain(|_, w| {
            let gone = w.exited || w.last.is_none();
            if gone {
                seen += w.cpu();
            }
            !gone
        });
        self.exited_cpu += gained;
        out.cpu += gained.saturating_sub(seen);
        if out.processes > 0 {
            self.rss_first.get_or_insert(out.rss_bytes);
            self.rss_last = out.rss_bytes;
            self.rss_peak = self.rss_peak.max(out.rss_bytes);
            self.fds_max = self.fds_max.max(out.fds);
            self.threads_max = self.threads_max.max(out.threads);
        } else {
            self.rss_last = 0;
        }
        out
    }

    fn row(&self) -> Option<TargetProcess> {
        let cpu = self.exited_cpu + self.alive.values().map(Watched::cpu).sum::<Duration>();
        (self.count > 0).then(|| TargetProcess {
            name: match self.count {
                1 => "stdio servers (1 process)".to_string(),
                n => format!("stdio servers ({n} processes)"),
            },
            cpu_seconds: cpu.as_secs_f64(),
            cpu_us_per_request: None,
            rss_first_bytes: self.rss_first.unwrap_or(0),
            rss_last_bytes: self.rss_last,
            rss_peak_bytes: self.rss_peak,
            fds_max: self.fds_max,
            threads_max: self.threads_max,
            exited: self.alive.is_empty(),
        })
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
    /// Spawned stdio servers: one row for all of them.
    children: Option<Spawned>,
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
    /// Started during the run (a spawned server): its CPU counts from zero, not from the
    /// first sample.
    from_zero: bool,
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
            from_zero: false,
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
        let before = match self.last {
            Some(l) => l.cpu,
            None if self.from_zero => Duration::ZERO,
            None => u.cpu,
        };
        let delta = u.cpu.saturating_sub(before);
        self.first.get_or_insert(u);
        self.last = Some(u);
        self.peak_rss = self.peak_rss.max(u.rss_bytes);
        self.max_fds = self.max_fds.max(u.fds);
        self.max_threads = self.max_threads.max(u.threads);
        Some((delta, u))
    }

    fn cpu(&self) -> Duration {
        match (self.first, self.last) {
            (_, Some(l)) if self.from_zero => l.cpu,
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
            children: children.map(|registry| Spawned {
                registry,
                ..Spawned::default()
            }),
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
        for w in &mut self.named {
            if let Some((d, u)) = w.sample(ticks, page) {
                out.add(d, u);
            }
        }
        if let Some(s) = &mut self.children {
            let c = s.sample(ticks, page);
            out.cpu += c.cpu;
            out.rss_bytes += c.rss_bytes;
            out.fds += c.fds;
            out.threads += c.threads;
            out.processes += c.processes;
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
        rows.extend(self.children.as_ref().and_then(Spawned::row));
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
    let of = |t: u64| {
        Duration::from_secs(t / ticks) + Duration::from_nanos((t % ticks) * 1_000_000_000 / ticks)
    };
    let cpu = of(s.cpu_ticks);
    Some((
        s.comm,
        Usage {
            cpu,
            children_cpu: of(s.children_ticks),
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
    /// cutime + cstime: CPU time of the waited-for children.
    children_ticks: u64,
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
        children_ticks: field(16)? + field(17)?,
        threads: field(20)?,
        rss_pages: field(24)?,
    })
}

/// This process's peak resident set (`VmHWM` of `/proc/self/status`), where the platform has it.
pub fn own_peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
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
    fn this_process_peak_memory_is_read() {
        let held = vec![1u8; 8 << 20];
        let peak = own_peak_rss_bytes().expect("/proc/self/status has VmHWM on Linux");
        assert!(peak >= 8 << 20, "{peak} bytes while holding 8 MiB");
        drop(held);
    }

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let line = "4242 (my (odd) server) S 1 4242 4242 0 -1 4194560 1200 0 3 0 250 75 0 0 20 0 7 0 \
                    123456 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                comm: "my (odd) server".into(),
                cpu_ticks: 325,
                children_ticks: 0,
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
    fn the_session_fit_is_the_least_squares_slope() {
        let mut f = SessionFit::default();
        assert_eq!(f.slope(), None);
        // 16 KiB per session on top of 50 MB, give or take a page.
        for (i, noise) in [0i64, 4096, -4096, 0, 8192, -4096].iter().enumerate() {
            let x = 1000 * i as u64 + 3;
            f.add(x, (50_000_000 + 16_384 * x as i64 + noise) as u64);
        }
        let slope = f.slope().expect("sessions moved");
        assert!((slope - 16_384.0).abs() < 5.0, "{slope}");
        assert_eq!((f.points, f.first_sessions, f.last_sessions), (6, 3, 5003));
        // Flat memory: zero; no spread in sessions: none.
        let mut flat = SessionFit::default();
        flat.add(0, 7);
        flat.add(10, 7);
        assert_eq!(flat.slope(), Some(0.0));
        let mut still = SessionFit::default();
        still.add(5, 1);
        still.add(5, 9);
        assert_eq!(still.slope(), None);
    }

    #[test]
    fn spawned_servers_are_one_row_and_exits_are_noticed() {
        let children = Children::default();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        children.push(child.id());
        let mut s = Sampler::new(&[], Some(children.clone())).expect("linux");
        assert_eq!(s.sample().processes, 1);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(s.sample().processes, 0);
        let rows = s.processes();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].name, "stdio servers (1 process)");
        // Churn: servers that come and go are counted, then forgotten (bounded memory).
        for _ in 0..3 {
            let mut c = std::process::Command::new("sleep")
                .arg("5")
                .spawn()
                .expect("sleep");
            children.push(c.id());
            assert_eq!(s.sample().processes, 1);
            let _ = c.kill();
            let _ = c.wait();
        }
        s.sample();
        let spawned = s.children.as_ref().expect("watching");
        assert!(spawned.alive.is_empty(), "{:?}", spawned.alive);
        assert_eq!(s.processes()[0].name, "stdio servers (4 processes)");
        assert!(rows[0].exited && rows[0].threads_max >= 1, "{rows:?}");
    }
}
