//! The start gate's bookkeeping: how many sessions have finished setting up, and how.

use std::cell::{Cell, RefCell};
use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct SetupTally {
    expected: u32,
    connected: Cell<u32>,
    rejected: Cell<u32>,
    failed: Cell<u32>,
    first_error: RefCell<Option<String>>,
    notify: Notify,
}

impl SetupTally {
    pub fn new(expected: u32) -> Self {
        SetupTally {
            expected,
            ..SetupTally::default()
        }
    }

    /// A session's set-up outcome: Ok, rejected (`Err(None)`) or failed (`Err(Some(why))`).
    pub fn report(&self, outcome: &Result<(), Option<String>>) {
        match outcome {
            Ok(()) => self.connected.set(self.connected.get() + 1),
            Err(None) => self.rejected.set(self.rejected.get() + 1),
            Err(Some(why)) => {
                self.failed.set(self.failed.get() + 1);
                self.first_error
                    .borrow_mut()
                    .get_or_insert_with(|| why.clone());
            }
        }
        if self.settled() == self.expected {
            self.notify.notify_waiters();
        }
    }

    fn settled(&self) -> u32 {
        self.connected.get() + self.rejected.get() + self.failed.get()
    }

    /// Waits until every session has reported.
    pub async fn all_settled(&self) {
        loop {
            let notified = self.notify.notified();
            if self.settled() >= self.expected {
                return;
            }
            notified.await;
        }
    }

    /// (connected, rejected, failed, first error).
    pub fn counts(&self) -> (u32, u32, u32, Option<String>) {
        (
            self.connected.get(),
            self.rejected.get(),
            self.failed.get(),
            self.first_error.borrow().clone(),
        )
    }
}
