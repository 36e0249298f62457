//! A common start for generators that run one scenario together (`--start-at`,
//! `--start-barrier`), so that their intervals fall on one wall-clock grid and their merged time
//! series means something.
//!
//! The barrier is a directory every shard can write (a shared volume): each shard writes
//! `ready-I` once its target passed the preflight; shard 0 waits for all N, then writes `start`
//! (an RFC 3339 time [`LEAD`] ahead, on a whole second); every shard reads it and starts then.
//! Nothing else coordinates: the clocks of the machines are assumed synchronised (NTP), which
//! the lateness each run records makes visible when they are not.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::scenario::Shard;

/// How long after the barrier completes the load starts: time for every shard to see it.
pub const LEAD: Duration = Duration::from_secs(3);

/// How often the barrier files are looked at.
const POLL: Duration = Duration::from_millis(100);

/// How the start of the load is chosen.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum StartAt {
    /// As soon as the target passed the preflight.
    #[default]
    Now,
    /// At this time (`--start-at`).
    At(SystemTime),
    /// When every shard is ready (`--start-barrier DIR`), waiting at most `timeout`.
    Barrier { dir: PathBuf, timeout: Duration },
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("start barrier {dir}: {why}")]
    Barrier { dir: String, why: String },
    #[error("interrupted while waiting at the start barrier (no load was sent)")]
    Interrupted,
}

/// When the load starts, as agreed: `None` for [`StartAt::Now`]. Blocks at a barrier until
/// every shard is ready (checking `interrupted` between looks).
pub fn agree(
    start: &StartAt,
    shard: Shard,
    interrupted: &dyn Fn() -> bool,
) -> Result<Option<(SystemTime, &'static str)>, StartError> {
    match start {
        StartAt::Now => Ok(None),
        StartAt::At(t) => Ok(Some((*t, "start-at"))),
        StartAt::Barrier { dir, timeout } => {
            barrier(dir, shard, *timeout, interrupted).map(|t| Some((t, "barrier")))
        }
    }
}

fn barrier(
    dir: &Path,
    shard: Shard,
    timeout: Duration,
    interrupted: &dyn Fn() -> bool,
) -> Result<SystemTime, StartError> {
    let fail = |why: String| StartError::Barrier {
        dir: dir.display().to_string(),
        why,
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(format!("cannot create it: {e}")))?;
    let entered = SystemTime::now();
    // An earlier run's start, long past: this directory is not fresh.
    if let Some(t) = read_start(dir).map_err(&fail)?
        && entered
            .duration_since(t)
            .is_ok_and(|ago| ago > timeout + LEAD)
    {
        return Err(fail(format!(
            "holds the start of an earlier run ({}): give each run a fresh directory",
            rfc3339(t)
        )));
    }
    let mine = dir.join(format!("ready-{}", shard.index));
    write_atomically(dir, &mine, &rfc3339(entered)).map_err(&fail)?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(t) = read_start(dir).map_err(&fail)? {
            return Ok(t);
        }
        if shard.index == 0 {
            let missing: Vec<usize> = (0..shard.count)
                .filter(|i| !dir.join(format!("ready-{i}")).exists())
                .collect();
            if missing.is_empty() {
                let at = whole_second_after(SystemTime::now() + LEAD);
                write_atomically(dir, &dir.join("start"), &rfc3339(at)).map_err(&fail)?;
                return Ok(at);
            }
            if Instant::now() >= deadline {
                return Err(fail(format!(
                    "{} of {} shards ready after {}; missing: {}",
                    shard.count - missing.len(),
                    shard.count,
                    mcpbench_knobs::format_duration(timeout),
                    list(&missing)
                )));
            }
        } else if Instant::now() >= deadline {
            return Err(fail(format!(
                "no start after {}: shard 0 writes it once every shard is ready (is shard 0 \
                 running, with the same directory?)",
                mcpbench_knobs::format_duration(timeout)
            )));
        }
        if interrupted() {
            return Err(StartError::Interrupted);
        }
        std::thread::sleep(POLL);
    }
}

/// The `start` file's time, if it has been written.
fn read_start(dir: &Path) -> Result<Option<SystemTime>, String> {
    let path = dir.join("start");
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_time(text.trim())
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Written to a temporary name and renamed: a reader sees all of it or nothing.
fn write_atomically(dir: &Path, path: &Path, text: &str) -> Result<(), String> {
    let tmp = dir.join(format!(
        ".{}.{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("tmp"),
        std::process::id()
    ));
    std::fs::write(&tmp, format!("{text}\n"))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn list(ix: &[usize]) -> String {
    ix.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn whole_second_after(t: SystemTime) -> SystemTime {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    SystemTime::UNIX_EPOCH + Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

/// An RFC 3339 time (`2026-12-02T10:00:00Z`, offsets and fractions accepted).
pub fn parse_time(text: &str) -> Result<SystemTime, String> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map(SystemTime::from)
        .map_err(|e| format!("`{text}` is not an RFC 3339 time ({e}), e.g. 2026-12-02T10:00:00Z"))
}

pub fn rfc3339(t: SystemTime) -> String {
    time::OffsetDateTime::from(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// When the run's clock starts, on both clocks, and how late that is against `agreed`: as
/// soon as possible (`lead` from now) without an agreement; at the agreed time when it is
/// still ahead; else at the first boundary of the common interval grid (agreed + k ×
/// `interval`) that is — so a late run's intervals still line up with the others'.
pub fn schedule(
    agreed: Option<SystemTime>,
    interval: Duration,
    lead: Duration,
) -> (SystemTime, Instant, Option<Duration>) {
    let (now_wall, now) = (SystemTime::now(), Instant::now());
    let earliest = now_wall + lead;
    let Some(agreed) = agreed else {
        return (earliest, now + lead, None);
    };
    let at = match earliest.duration_since(agreed) {
        Err(_) => agreed,
        Ok(behind) => {
            let step = interval.as_secs_f64().max(1e-3);
            let k = (behind.as_secs_f64() / step).ceil();
            agreed + Duration::from_secs_f64(k * step)
        }
    };
    let wait = at.duration_since(now_wall).unwrap_or_default();
    let late = at.duration_since(agreed).unwrap_or_default();
    (at, now + wait, Some(late))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_time_and_late_starts_stay_on_the_common_grid() {
        let second = Duration::from_secs(1);
        let ahead = SystemTime::now() + Duration::from_secs(5);
        let (at, _, late) = schedule(Some(ahead), second, Duration::from_millis(20));
        assert_eq!((at, late), (ahead, Some(Duration::ZERO)));
        let past = SystemTime::now() - Duration::from_millis(2500);
        let (at, when, late) = schedule(Some(past), second, Duration::from_millis(20));
        assert_eq!(
            late,
            Some(Duration::from_secs(3)),
            "the next whole interval"
        );
        assert_eq!(at, past + Duration::from_secs(3));
        assert!(when > Instant::now());
        let (_, _, late) = schedule(None, second, Duration::from_millis(20));
        assert_eq!(late, None);
    }

    #[test]
    fn times_parse_or_say_what_is_expected() {
        let t = parse_time("2026-12-02T10:00:00Z").unwrap();
        assert_eq!(rfc3339(t), "2026-12-02T10:00:00Z");
        assert!(
            parse_time("10:00")
                .unwrap_err()
                .contains("e.g. 2026-12-02T10:00:00Z")
        );
    }

    /// Four shards on threads meet at one start; a missing shard times out naming it; a stale
    /// directory is refused.
    #[test]
    fn barrier_agrees_on_one_start_and_names_who_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let b = dir.path().join("barrier");
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let b = b.clone();
                std::thread::spawn(move || {
                    let s = StartAt::Barrier {
                        dir: b,
                        timeout: Duration::from_secs(20),
                    };
                    agree(&s, Shard { index: i, count: 4 }, &|| false)
                        .unwrap()
                        .unwrap()
                        .0
                })
            })
            .collect();
        let times: Vec<SystemTime> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(times.windows(2).all(|w| w[0] == w[1]), "{times:?}");
        assert!(times[0] > SystemTime::now(), "ahead of now");

        let lonely = dir.path().join("lonely");
        let s = StartAt::Barrier {
            dir: lonely.clone(),
            timeout: Duration::from_millis(300),
        };
        let e = agree(&s, Shard { index: 0, count: 3 }, &|| false).unwrap_err();
        assert!(e.to_string().contains("1 of 3 shards ready"), "{e}");
        assert!(e.to_string().contains("missing: 1, 2"), "{e}");
        let e = agree(&s, Shard { index: 1, count: 3 }, &|| true).unwrap_err();
        assert!(matches!(e, StartError::Interrupted), "{e}");

        std::fs::write(lonely.join("start"), "2020-01-01T00:00:00Z\n").unwrap();
        let e = agree(&s, Shard { index: 2, count: 3 }, &|| false).unwrap_err();
        assert!(e.to_string().contains("earlier run"), "{e}");
    }
}
