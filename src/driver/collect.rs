//! Collecting a run: the workers' shards merged per interval until every worker ended, the
//! live view published once per interval, interrupts (grace, a second one), the drain
//! deadline and `abort_on_fail` thresholds turned into the workers' stop and abort.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;

use super::{Interrupt, runner};
use crate::metrics::collector::{Collector, IntervalSnapshot, ShardMsg};
use crate::metrics::grid::Phase;
use crate::report::live::{Live, LiveSink};

/// Merges the workers' shards until every worker has ended. On `interrupt` no new request
/// starts and those in flight get `grace` (at most the request timeout) before they are
/// cancelled, at once on a second interrupt; they are also cancelled when they still run past
/// the drain deadline (end + timeout + 2 s), or (`abort_on_fail`) when a threshold is breached.
/// Returns how the run was interrupted, and why a threshold stopped it.
pub(super) async fn collect(
    ctx: &runner::Ctx,
    collector: &mut Collector,
    mut rx: UnboundedReceiver<ShardMsg>,
    (interrupt, grace): (&Interrupt, Duration),
    watch: &mut Option<Watch>,
) -> (Option<Stopped>, Option<(String, Instant)>) {
    let drain_deadline = ctx.end + ctx.endpoint.timeout + Duration::from_secs(2);
    let abort = || {
        ctx.stop.store(true, Ordering::Relaxed);
        ctx.aborted.store(true, Ordering::Relaxed);
        ctx.abort.cancel();
    };
    let mut stopped: Option<Stopped> = None;
    let mut threshold_stop = None;
    // Far enough never to fire before an interrupt sets it.
    let mut grace_end = drain_deadline + Duration::from_secs(3600);
    loop {
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(m) => {
                    let done = collector.accept(m);
                    if let Some(w) = watch.as_mut().filter(|_| !done.is_empty()) {
                        w.publish(&done, collector, None);
                    }
                    if threshold_stop.is_none()
                        && let Some(why) = breached_now(ctx, collector, &done)
                    {
                        threshold_stop = Some((why, Instant::now()));
                        abort();
                    }
                    if collector.all_done() {
                        return (stopped, threshold_stop);
                    }
                }
                None => return (stopped, threshold_stop),
            },
            _ = interrupt.requested(), if stopped.is_none() => {
                let now = Instant::now();
                let grace = grace.min(ctx.timeout);
                stopped = Some(Stopped {
                    at: now.checked_duration_since(ctx.start),
                    grace,
                    hurried: false,
                });
                ctx.stop.store(true, Ordering::Relaxed);
                ctx.drain.cancel();
                grace_end = now + grace;
                if grace.is_zero() {
                    abort();
                }
            }
            _ = interrupt.hurried(), if stopped.as_ref().is_some_and(|s| !s.hurried) => {
                if let Some(s) = stopped.as_mut() {
                    s.hurried = true;
                }
                abort();
            }
            _ = tokio::time::sleep_until(grace_end.into()), if !ctx.abort.is_cancelled() => {
                abort();
            }
            _ = tokio::time::sleep_until(drain_deadline.into()), if !ctx.abort.is_cancelled() => {
                abort();
            }
        }
    }
}

/// How an interrupted run stopped.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stopped {
    /// When, from the start of the run; `None` before it (waiting for an agreed start).
    pub(super) at: Option<Duration>,
    /// What the requests in flight were given.
    grace: Duration,
    /// A second interrupt cut the grace short.
    hurried: bool,
}

impl Stopped {
    /// The note in the summary: what stopped the run and what became of the requests in flight.
    pub(super) fn note(&self, cause: Option<&str>, cancelled: u64) -> String {
        let drained = if self.hurried {
            "a second interrupt cancelled the requests still in flight".to_string()
        } else if self.grace.is_zero() {
            "requests in flight were cancelled (no grace)".to_string()
        } else {
            format!(
                "requests in flight had {} to finish",
                mcpbench_knobs::format_duration(self.grace)
            )
        };
        let cause = cause.unwrap_or("a signal");
        let Some(at) = self.at else {
            return format!("interrupted by {cause} before the agreed start: no load was sent");
        };
        format!(
            "interrupted by {cause} at {:.1}s: no new requests; {drained}; {cancelled} cancelled \
             (counted apart, not as errors)",
            at.as_secs_f64()
        )
    }
}

/// `abort_on_fail`: after a measured interval, the first threshold the run so far breaches.
fn breached_now(
    ctx: &runner::Ctx,
    collector: &Collector,
    done: &[IntervalSnapshot],
) -> Option<String> {
    let t = &ctx.plan.thresholds;
    let last = done.iter().rev().find(|s| s.phase == Phase::Measured)?;
    if !t.abort_on_fail || t.checks.is_empty() {
        return None;
    }
    let measured = last.end.saturating_sub(ctx.plan.load.warmup);
    let s =
        crate::report::build::provisional(&ctx.plan, collector.ops(), &collector.totals, measured);
    let b = s.breached().next()?;
    Some(format!(
        "stopped early at {:.1}s: threshold {} {} breached (abort_on_fail)",
        last.end.as_secs_f64(),
        b.name,
        b.condition
    ))
}

/// A run's name outside its files: its directory's (with the parent's for a part of a larger
/// run: `…-find-max/step-03`).
pub(super) fn run_id(dir: &std::path::Path, part: bool) -> String {
    let name = |p: &std::path::Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    match (name(dir), dir.parent().and_then(name).filter(|_| part)) {
        (Some(d), Some(p)) => format!("{p}/{d}"),
        (Some(d), None) => d,
        (None, _) => dir.display().to_string(),
    }
}

/// A run's live view and where it goes.
pub(super) struct Watch {
    pub(super) sink: Option<LiveSink>,
    /// `--otlp-endpoint`'s exporter and the run it pushes.
    pub(super) otlp: Option<(Arc<crate::otlp::Exporter>, Arc<crate::otlp::RunInfo>)>,
    pub(super) live: Live,
}

impl Watch {
    /// Takes the intervals the collector completed; publishes the view once.
    /// Sends the view with the intervals `done`; `finished`: the run is over, its measured
    /// window this long.
    pub(super) fn publish(
        &mut self,
        done: &[IntervalSnapshot],
        collector: &Collector,
        finished: Option<Duration>,
    ) {
        for snap in done {
            self.live.update(snap, &collector.totals);
        }
        if let Some(measured) = finished {
            self.live.finish(measured);
        }
        let live = Arc::new(self.live.clone());
        if let Some((x, run)) = &self.otlp {
            x.push(run, live.clone());
        }
        if let Some(sink) = &self.sink {
            sink.send_replace(Some(live));
        }
    }

    /// After the final view: the exporter's note, if its pushes failed (waits a bounded time
    /// for the final push).
    pub(super) fn export_note(&self) -> Option<String> {
        self.otlp.as_ref().and_then(|(x, _)| x.finish_run())
    }
}
