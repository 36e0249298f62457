//! A deadline timer that costs nothing per request: one tokio `Sleep`, moved on lazily.
//!
//! `tokio::time::timeout` per request inserts an entry into the timer wheel and removes it again
//! (under the time driver's lock) for every request. A [`Watchdog`] is made once per connection
//! or session and left armed for some earlier request's deadline; when it fires, the wait then
//! under way is checked against its own deadline and the timer moved to it. Deadlines of one
//! watchdog mostly move forward, so that is about one reset per timeout period, and a deadline is
//! still detected on time (an earlier deadline than the armed one re-arms at once).

use std::{
    future::{Future, poll_fn},
    pin::Pin,
    task::{Context, Poll},
};

use tokio::time::{Instant, Sleep};

/// One connection's or session's timer (see the module documentation).
#[derive(Debug)]
pub struct Watchdog {
    sleep: Pin<Box<Sleep>>,
}

impl Watchdog {
    /// A watchdog with no deadline pending. Needs a tokio runtime with time enabled.
    pub fn new() -> Self {
        Watchdog {
            sleep: Box::pin(tokio::time::sleep_until(Instant::now())),
        }
    }

    /// `Ready` once `at` has passed; registers the task to be woken then.
    pub fn poll_until(&mut self, at: Instant, cx: &mut Context<'_>) -> Poll<()> {
        if at < self.sleep.deadline() {
            self.sleep.as_mut().reset(at);
        }
        while self.sleep.as_mut().poll(cx).is_ready() {
            if Instant::now() >= at {
                return Poll::Ready(());
            }
            self.sleep.as_mut().reset(at);
        }
        Poll::Pending
    }

    /// Completes once `at` has passed.
    pub async fn until(&mut self, at: Instant) {
        poll_fn(|cx| self.poll_until(at, cx)).await
    }

    /// Awaits `f` until `at`: `None` if the deadline came first (`f` is left as it was, for the
    /// caller to drop or to wait on further). Pinned by the caller: moving a large future into
    /// this one would cost a copy per call.
    pub async fn bounded<F: Future>(
        &mut self,
        at: Instant,
        mut f: Pin<&mut F>,
    ) -> Option<F::Output> {
        poll_fn(|cx| {
            if let Poll::Ready(v) = f.as_mut().poll(cx) {
                return Poll::Ready(Some(v));
            }
            self.poll_until(at, cx).map(|()| None)
        })
        .await
    }
}

impl Default for Watchdog {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use std::{task::Waker, time::Duration};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_deadline_fires_on_time_whether_it_moves_forward_or_back() {
        let s = Duration::from_secs;
        let mut w = Watchdog::new();
        let mut never = std::pin::pin!(std::future::pending::<()>());
        let t = Instant::now();
        assert!(w.bounded(t + s(1), never.as_mut()).await.is_none());
        assert_eq!(Instant::now() - t, s(1));
        // Forward: armed for 3 s while the next call ends early, the timer fires then for a
        // call with a later deadline and is moved on to it.
        let t = Instant::now();
        let soon = std::pin::pin!(tokio::time::sleep(Duration::from_millis(500)));
        assert_eq!(w.bounded(t + s(3), soon).await, Some(()));
        assert!(w.bounded(t + s(5), never.as_mut()).await.is_none());
        assert_eq!(Instant::now() - t, s(5));
        // Back: a deadline earlier than the one armed is not missed.
        let t = Instant::now();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(w.poll_until(t + s(60), &mut cx).is_pending());
        w.until(t + s(1)).await;
        assert_eq!(Instant::now() - t, s(1));
    }
}
