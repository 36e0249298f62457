//! Parsers of procfs, sysfs and cgroup files: pure functions of the files' text.

/// One core's times from /proc/stat, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct CpuTimes {
    /// Everything but idle and iowait.
    pub(super) busy: u64,
    /// Given to other guests by the hypervisor (counted in `busy`).
    pub(super) steal: u64,
    /// user + nice + system + idle + iowait + irq + softirq + steal (guest time is in user).
    pub(super) total: u64,
}

impl CpuTimes {
    /// The times spent between `before` and these.
    pub(super) fn since(&self, before: &CpuTimes) -> CpuTimes {
        CpuTimes {
            busy: self.busy.saturating_sub(before.busy),
            steal: self.steal.saturating_sub(before.steal),
            total: self.total.saturating_sub(before.total),
        }
    }
}

/// The per-core lines of /proc/stat (`cpu0 …`, not the `cpu` total), in order.
pub(super) fn parse_proc_stat(text: &str) -> Vec<CpuTimes> {
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
pub(super) fn parse_own_ticks(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the name: state is field 3; utime and stime are fields 14 and 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Sockets in TIME_WAIT (state `06`) in /proc/net/tcp or tcp6 (a header line, then one line
/// per socket: `sl local rem st …`).
pub(super) fn count_time_wait(text: &str) -> u64 {
    text.lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(3) == Some("06"))
        .count() as u64
}

/// Where this process's cgroups are, from /proc/self/cgroup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Cgroups {
    /// The unified (v2) hierarchy's path (`0::/path`).
    pub(super) unified: Option<String>,
    /// The v1 `cpu` controller's path (`N:cpu,cpuacct:/path`).
    pub(super) cpu_v1: Option<String>,
}

/// The cgroup v2 path, and the v1 `cpu` controller's, from /proc/self/cgroup.
pub(super) fn parse_cgroup(text: &str) -> Cgroups {
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
pub(super) fn parse_cpu_max(text: &str) -> Result<Option<f64>, String> {
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
pub(super) fn parse_cfs(quota: &str, period: &str) -> Result<Option<f64>, String> {
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
pub(super) fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(str::parse::<f64>);
    Some([it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?])
}

/// The bracketed choice of a sysfs mode file (`always [madvise] never` → `madvise`).
pub(super) fn selected(text: &str) -> Option<&str> {
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(&text[start..end])
}

/// A `Key:   123 kB` line of /proc/meminfo.
pub(super) fn meminfo_kb(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}
