//! The engine thread's inbox: readers' commands and the proxy's events in one queue, and the one
//! timed wait between samples. It knows nothing of what the messages say: commands `C` are
//! taken one at a time, events `E` in runs.
//!
//! Rules:
//! - Commands and events are taken in the order they were sent: a reader that learnt of a
//!   request from the proxy asks about it after the engine has heard of it.
//! - Events that arrive together are taken together: a flood of requests is one wake-up.
//! - Between two samples the engine thread sleeps in a single wait that ends at the next sample
//!   or at the first message. No runtime timer and no hand-off to a thread pool: measured on the
//!   development machine, tokio's 1 s interval alone cost 0.015 % of a core (its timer wheel
//!   wakes the thread early, then again), a plain timed wait 0.007 %.
//! - The wait is timed on the engine's clock: in real time for the machine's clock, on tokio's
//!   pausable time for a clock that follows a runtime ([`Clock::runtime`], tests).

use crate::time::clock::Clock;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Why the engine thread woke.
pub enum Woken<C, E> {
    Command(C),
    /// The events sent since the engine last looked, oldest first.
    Events(Vec<E>),
    /// The next sample is due.
    Due,
    /// Nobody will send anything more: stop.
    Closed,
}

enum Message<C, E> {
    Command(C),
    Event(E),
}

struct Queue<C, E> {
    messages: VecDeque<Message<C, E>>,
    closed: bool,
}

pub struct Inbox<C, E> {
    queue: Mutex<Queue<C, E>>,
    ready: Condvar,
    /// The same signal for a waiter on tokio's clock (tests).
    notify: tokio::sync::Notify,
}

impl<C, E> Default for Inbox<C, E> {
    fn default() -> Self {
        Inbox {
            queue: Mutex::new(Queue {
                messages: VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
            notify: tokio::sync::Notify::new(),
        }
    }
}

impl<C, E> Inbox<C, E> {
    fn lock(&self) -> MutexGuard<'_, Queue<C, E>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn signal(&self) {
        self.ready.notify_all();
        self.notify.notify_one();
    }

    /// Queues `command`; gives it back when the engine has stopped.
    pub fn send(&self, command: C) -> Result<(), C> {
        let mut q = self.lock();
        if q.closed {
            return Err(command);
        }
        q.messages.push_back(Message::Command(command));
        drop(q);
        self.signal();
        Ok(())
    }

    /// Queues an event; gives it back when the engine has stopped.
    pub fn report(&self, event: E) -> Result<(), E> {
        let mut q = self.lock();
        if q.closed {
            return Err(event);
        }
        let first = !matches!(q.messages.back(), Some(Message::Event(_)));
        q.messages.push_back(Message::Event(event));
        drop(q);
        // Events behind events are taken with them: the engine was told already.
        if first {
            self.signal();
        }
        Ok(())
    }

    /// No more messages: the engine stops once it has taken the commands already queued.
    pub fn close(&self) {
        self.lock().closed = true;
        self.signal();
    }

    /// What is waiting, oldest first; `None` when nothing is.
    pub fn take(&self) -> Option<Woken<C, E>> {
        Self::take_from(&mut self.lock())
    }

    fn take_from(q: &mut Queue<C, E>) -> Option<Woken<C, E>> {
        match q.messages.pop_front() {
            Some(Message::Command(c)) => Some(Woken::Command(c)),
            Some(Message::Event(e)) => {
                let mut events = vec![e];
                while let Some(Message::Event(_)) = q.messages.front() {
                    if let Some(Message::Event(e)) = q.messages.pop_front() {
                        events.push(e);
                    }
                }
                Some(Woken::Events(events))
            }
            None => q.closed.then_some(Woken::Closed),
        }
    }

    /// Waits until a message arrives or `clock` reaches `deadline`.
    pub fn wait(&self, clock: &dyn Clock, deadline: Duration) -> Woken<C, E> {
        let Some(runtime) = clock.runtime() else {
            return self.wait_until(deadline, || clock.elapsed());
        };
        // On tokio's clock, so that a paused test runtime moves time on as soon as it idles.
        loop {
            let notified = self.notify.notified();
            if let Some(w) = self.take() {
                return w;
            }
            let now = clock.elapsed();
            if now >= deadline {
                return Woken::Due;
            }
            runtime.block_on(async {
                tokio::select! {
                    () = notified => {}
                    () = tokio::time::sleep(deadline - now) => {}
                }
            });
        }
    }

    /// Waits in real time until a message arrives or `now()` reaches `deadline`.
    pub fn wait_until(&self, deadline: Duration, now: impl Fn() -> Duration) -> Woken<C, E> {
        let mut q = self.lock();
        loop {
            if let Some(w) = Self::take_from(&mut q) {
                return w;
            }
            let now = now();
            if now >= deadline {
                return Woken::Due;
            }
            q = match self.ready.wait_timeout(q, deadline - now) {
                Ok((q, _)) => q,
                Err(e) => e.into_inner().0,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    /// A command, and an event naming a port, as the engine's are.
    #[derive(Debug, PartialEq)]
    struct Reset;
    type Port = Option<u16>;

    #[test]
    fn a_message_ends_the_wait_and_without_one_the_deadline_does() {
        let inbox: Arc<Inbox<Reset, Port>> = Arc::new(Inbox::default());
        let origin = Instant::now();
        let now = move || origin.elapsed();
        assert!(matches!(
            inbox.wait_until(Duration::from_millis(30), now),
            Woken::Due
        ));
        assert!(origin.elapsed() >= Duration::from_millis(30));
        let sender = Arc::clone(&inbox);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            let _ = sender.report(Some(11434));
        });
        assert!(matches!(
            inbox.wait_until(Duration::from_secs(60), now),
            Woken::Events(e) if e.len() == 1
        ));
        assert!(origin.elapsed() < Duration::from_secs(10));
        let _ = t.join();
        inbox.close();
        assert!(matches!(inbox.take(), Some(Woken::Closed)));
        assert!(inbox.send(Reset).is_err());
        assert!(inbox.report(None).is_err());
    }

    #[test]
    fn events_arriving_together_are_one_wake_up_and_keep_their_place_among_commands() {
        let inbox: Inbox<Reset, Port> = Inbox::default();
        let event = Some;
        assert!(inbox.report(event(1)).is_ok());
        assert!(inbox.report(event(2)).is_ok());
        assert!(inbox.send(Reset).is_ok());
        assert!(inbox.report(event(3)).is_ok());
        let ports = |w: Option<Woken<Reset, Port>>| match w {
            Some(Woken::Events(e)) => e,
            _ => Vec::new(),
        };
        assert_eq!(ports(inbox.take()), [Some(1), Some(2)]);
        assert!(matches!(inbox.take(), Some(Woken::Command(Reset))));
        assert_eq!(ports(inbox.take()), [Some(3)]);
        assert!(inbox.take().is_none());
    }
}
