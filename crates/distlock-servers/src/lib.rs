//! Real servers for tests, started from the installed binaries on free loopback ports in
//! temporary directories: Redis (alone, over TLS, as a cluster), PostgreSQL, MariaDB,
//! ZooKeeper and etcd (alone, over TLS, as an ensemble or a cluster); a TCP proxy that
//! delays, swallows or cuts traffic on command; and the signals fault tests send.
//!
//! A server is stopped and its directory removed when its [`Server`] is dropped; it can be
//! killed, paused, resumed and restarted on the same port in between. A program that is
//! not installed is an error saying how to install it ([`LaunchError::Missing`]), never a
//! skip.
//!
//! ```no_run
//! let redis = distlock_servers::redis_server()?;
//! let url = format!("redis://{}/0", redis.addr());
//! redis.pause();
//! redis.resume();
//! # Ok::<(), distlock_servers::LaunchError>(())
//! ```
//!
//! `distlock torture` starts its servers with this crate, and `distlock-testkit` builds the
//! backends' conformance suites on it.

mod etcd;
mod launchers;
mod proxy;
mod server;
mod signal;
mod spec;
mod zookeeper;

pub use etcd::{
    EtcdCluster, etcd_cluster, etcd_server, etcd_server_with, etcd_tls_server, etcd_watch_counts,
    etcdctl,
};
pub use launchers::{
    DATABASE_PASSWORD, RedisCluster, TestCertificates, mariadb_server, mariadb_tls_server,
    mariadb_url, postgres_server, postgres_tls_server, postgres_url, redis_cluster, redis_server,
    redis_server_with, redis_tls_server,
};
pub use proxy::{FaultProxy, ProxyMode};
pub use server::{Server, free_port, servers_in_own_process_groups};
pub use signal::{Signal, send};
pub use spec::{LaunchError, Ready, ServerSpec, find_program};
pub use zookeeper::{ZkEnsemble, zookeeper_ensemble, zookeeper_server, zookeeper_tls_server};
