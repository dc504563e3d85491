#![doc = include_str!("../docs.md")]

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
    redis_server_with, redis_spec, redis_tls_server,
};
pub use proxy::{FaultProxy, ProxyMode};
pub use server::{Server, free_port, servers_in_own_process_groups};
pub use signal::{Signal, send};
pub use spec::{LaunchError, Ready, ServerSpec, find_program};
pub use zookeeper::{ZkEnsemble, zookeeper_ensemble, zookeeper_server, zookeeper_tls_server};
