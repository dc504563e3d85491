//! The runtime the ZooKeeper sessions of this process live on: a thread of its own, so a
//! client outlives whichever runtime connected it. zookeeper-client runs each session's task
//! on the runtime that connects it, and distlock's heartbeats and watches run beside it.

use distlock_core::backend::SideRuntime;

/// The sessions' runtime.
pub(crate) static SESSIONS: SideRuntime = SideRuntime::new("zookeeper", "distlock-zookeeper");
