//! The primitives users hold: [`Mutex`], [`RwLock`] and [`Semaphore`].
//!
//! Pick a `Mutex` when one holder at a time may touch a resource; an `RwLock` when many may
//! read it at once but writes need it alone (writers are not starved by readers); a
//! `Semaphore` to bound how many holders run at once (each permit is its own lease, so a
//! crashed holder's permits come back when its lease ends); a `MultiLock` to hold several
//! mutexes at once, all or nothing.

mod multi;
mod mutex;
mod rwlock;
mod semaphore;

pub use multi::{MultiGuard, MultiLock};
pub use mutex::Mutex;
pub use rwlock::RwLock;
pub use semaphore::Semaphore;
