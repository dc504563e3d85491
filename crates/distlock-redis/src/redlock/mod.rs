//! RedLock over independent Redis masters: `redlock://h1:6379,h2:6379,h3:6379[/db]`.
//!
//! # How a lock is taken
//!
//! Every acquire goes to all masters at once, each bounded by a timeout much shorter than
//! the TTL (`node_timeout`, by default a twentieth of the TTL between 5 ms and 200 ms). On
//! each master it is the Redis backend's own acquire (the same keys and script, so
//! `distlock status` against one master shows its part). The lock is held when a majority
//! (N/2 + 1) granted it and time is left: the guard counts its lease from when the requests
//! went out, less 1 % of the TTL and 2 ms for clock drift.
//!
//! # How a waiter waits
//!
//! A refused request that waits takes a place in every master's queue (the Redis
//! backend's own), at the same place in each: the client's clock in microseconds when it
//! first tried, so every master orders the same waiters alike, where each would order them
//! by arrival (waiters whose clients' clocks differ are ordered by them: a client whose
//! clock is behind comes earlier by as much). A release on a master hands the lock there
//! to its head waiter for a short claim (`handoff_claim`, as on one Redis server) and
//! tells that waiter's client; of the waiters behind it only the next hears anything, when
//! to look should the head's claim lapse (one message each per master per release: no
//! herd). The head tries once a majority of masters told it, or, once one did, after the
//! shorter of `node_timeout` and half the claim: its try finds the grants made for it,
//! confirms them for its TTL, and is granted in one round trip. A head that died is passed
//! over at once (nobody listens on its client's channel); one that stopped lets the claims
//! lapse, and the next waiter, told when, tries then unless the lock is held on a
//! majority. Waiters refresh their places every two seconds (a try on every master).
//!
//! A master's queue orders its hand-offs only: a lock found free there goes to whoever
//! asks, waiters ahead or not. A master that missed a grant (out of reach, restarted, or a
//! replica promoted in its place) may still hold the queue entry of a waiter since granted
//! on the others, which would hold the next majority back until it expired; RedLock's
//! exclusion rests on majorities alone. A client whose subscription to a master was down
//! wakes all its waiters once it is back: the wake-ups sent meanwhile went astray.
//!
//! Where the masters' heads differ (a waiter's place reached only some masters, the
//! holder's release has not reached a majority yet, or a master missed the holder's
//! grant), a try is granted on too few: it gives those grants back where it won them,
//! leaving the lock free there (not handing it on, which would pass a grant that did not
//! stand down the queue), and tries again after a random pause of at most 50 ms, doubled
//! for each split in a row up to 1.6 s (and no longer than the holder's time left). A
//! request that does not wait never queues: refused, it gives back what it won the same
//! way.
//!
//! Renewal and release go to all masters. A renewal holds the lock when a majority renewed;
//! when so many masters say "not held" that no majority can, the guard is `Lost`; when too
//! few answer, it is `AtRisk` until its lease runs out. An acquire that cannot reach a
//! majority fails with [`ErrorKind::QuorumNotReached`](distlock_core::ErrorKind).
//!
//! Mutexes are supported: two majorities always share a master, and that master refuses
//! one of two grants. Semaphores are not (permits granted on different majorities could
//! exceed the limit with no master seeing it); read/write locks and fair mode are not
//! either, since a waiting writer holding back new readers, like strict FIFO order, needs
//! one queue all masters agree on, and each master keeps its own. Each is refused with
//! `Unsupported`. `distlock status` shows the waiters of the masters' queues (an entry is
//! refreshed every two seconds while its request waits, and gone 5 s after its process
//! stops).
//!
//! # Fencing tokens
//!
//! Each master counts grants (on one counter for all names, starting from its clock in
//! microseconds, as the Redis backend does), and an acquire raises every master's count to
//! one least token, the client's clock in microseconds when it began, where the count is
//! behind it. A grant's token is the highest count among the majority that granted it,
//! and before the grant is reported that token is written back as the floor of the counter
//! on the masters of that majority that counted less (with one least token for all of
//! them, they agree, which is the steady state, and this costs nothing). A grant a release
//! handed on is counted by its master alone, one above its last, and agreed on the same
//! way when the waiter's try confirms it. Any later majority shares a master with it, whose next
//! count is higher, so tokens strictly increase — as long as masters keep their counters.
//! A master restarted without persistence forgets its counter and locks; its count restarts
//! from its clock, so tokens stay increasing unless its clock went back, but the lock itself
//! can then be granted twice (the restarted master joins a new majority). Restart masters
//! with persistence, or keep them down for longer than the longest TTL, and check fencing
//! tokens at the resource.
//!
//! # Limits of the safety argument
//!
//! RedLock's exclusion rests on time: masters expire keys by their clocks and clients count
//! leases by theirs. A master whose clock jumps forward expires a lock early; a client paused
//! (GC, SIGSTOP) past its lease acts on a lock it no longer holds. The guard's `safe_until`
//! and `Lost` report what the client can know; fencing tokens checked by the resource are the
//! remedy for what it cannot.

mod acquire;
mod adopt;
mod backend;
mod config;
mod connect;
mod fanout;
mod inspect;
mod notes;
mod tails;
mod wakes;

pub use backend::RedlockBackend;
pub use config::RedlockConfig;
