//! The runtime the etcd sessions of this process live on: a thread of its own, so a client
//! outlives whichever runtime connected it. The gRPC channel's worker runs on the runtime
//! that connects it, and distlock's keep-alives and watches run beside it.

use distlock_core::backend::SideRuntime;

/// The sessions' runtime.
pub(crate) static SESSIONS: SideRuntime = SideRuntime::new("etcd", "distlock-etcd");
