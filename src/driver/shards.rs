//! A worker's shard of the current interval ([`Shards`]: events recorded into the interval
//! their time falls in, handed to the collector once per interval), the requests in flight
//! (counted even when an abort cuts them), and the thread's CPU time.

use std::cell::{Cell, RefCell, RefMut};
use std::rc::Rc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use crate::metrics::collector::{ShardMsg, WorkerEnd};
use crate::metrics::grid::Grid;
use crate::metrics::recorder::{Phase, Recorder};

/// A request in flight, so that one cut short by an abort is still counted.
#[derive(Debug, Clone, Copy)]
pub(super) struct InFlight {
    pub(super) op: usize,
    pub(super) phase: Phase,
    pub(super) t0: Instant,
    /// The virtual user's tenant, for workload requests.
    pub(super) tenant: Option<usize>,
}

pub(super) type Slots = Rc<RefCell<Vec<Option<InFlight>>>>;

/// This worker's shard of the current interval.
///
/// Every event is recorded into the interval its time falls in: an event at or past the
/// interval's end hands the interval to the collector first (one message per interval, never
/// per request). So a request that ends just after a boundary is not counted before it,
/// however late the ticker wakes; the ticker hands over the intervals of a worker that has
/// nothing to record.
pub(super) struct Shards {
    pub(super) current: RefCell<Recorder>,
    /// The current interval and when it ends.
    pub(super) index: Cell<u64>,
    pub(super) ends: Cell<Instant>,
    pub(super) start: Instant,
    pub(super) grid: Grid,
    pub(super) worker: usize,
    pub(super) n_ops: usize,
    pub(super) tx: UnboundedSender<ShardMsg>,
    pub(super) recycle: Receiver<Recorder>,
    /// Requests in flight, for the gauge sent with each shard.
    pub(super) slots: Slots,
    /// The thread's CPU time when the current interval's shard began.
    pub(super) cpu_mark: Cell<Option<Duration>>,
}

impl Shards {
    /// The shard for an event at `t`.
    #[inline]
    pub(super) fn at(&self, t: Instant) -> RefMut<'_, Recorder> {
        if t >= self.ends.get() {
            self.rotate(t);
        }
        self.current.borrow_mut()
    }

    /// The current shard, for counters whose interval does not matter to the millisecond
    /// (sessions opened, connections).
    pub(super) fn now(&self) -> RefMut<'_, Recorder> {
        self.current.borrow_mut()
    }

    /// Hands over every interval that ended by `t`.
    fn rotate(&self, t: Instant) {
        while t >= self.ends.get() {
            let k = self.index.get();
            let fresh = self
                .recycle
                .try_recv()
                .unwrap_or_else(|_| Recorder::new(self.n_ops));
            let mut shard = std::mem::replace(&mut *self.current.borrow_mut(), fresh);
            shard.in_flight = self.slots.borrow().iter().filter(|s| s.is_some()).count() as u64;
            shard.cpu = self.cpu_since_mark();
            let _ = self.tx.send(ShardMsg {
                worker: self.worker,
                index: k,
                shard,
                last: None,
            });
            self.index.set(k + 1);
            self.ends.set(self.start + self.grid.end(k + 1));
        }
    }

    /// Hands over every interval as it ends (for a worker with nothing to record).
    pub(super) async fn tick(&self) {
        loop {
            tokio::time::sleep_until(self.ends.get().into()).await;
            self.rotate(Instant::now());
        }
    }

    /// CPU time since the last mark (zero where the platform does not report it); moves the
    /// mark. One procfs read, once per interval.
    fn cpu_since_mark(&self) -> Duration {
        let now = thread_cpu();
        let since = match (self.cpu_mark.get(), now) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => Duration::ZERO,
        };
        self.cpu_mark.set(now);
        since
    }

    /// The worker's last message: what is left, and its CPU time.
    pub(super) fn finish(&self, cpu: Option<Duration>, handovers: Option<u64>) {
        let mut shard = std::mem::replace(&mut *self.current.borrow_mut(), Recorder::new(0));
        shard.cpu = self.cpu_since_mark();
        let _ = self.tx.send(ShardMsg {
            worker: self.worker,
            index: self.index.get(),
            shard,
            last: Some(WorkerEnd { cpu, handovers }),
        });
    }
}

/// CPU time (user + system) of the calling thread, where Linux reports it.
pub fn thread_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}
