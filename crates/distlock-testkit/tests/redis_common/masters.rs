//! RedLock masters started for one test, and plain connections to them.

use distlock_testkit::Server;

/// Three masters and the `redlock://` URL naming them, with `query` (`?…` or empty).
pub fn masters_with(query: &str) -> (Vec<Server>, String) {
    let servers: Vec<Server> = (0..3)
        .map(|_| distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let hosts: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let url = format!("redlock://{}/0{query}", hosts.join(","));
    (servers, url)
}

/// A plain connection to each of `servers`.
pub async fn raw_connections(servers: &[Server]) -> Vec<redis::aio::MultiplexedConnection> {
    let mut raws = Vec::new();
    for server in servers {
        let raw = redis::Client::open(format!("redis://{}/0", server.addr())).unwrap();
        raws.push(raw.get_multiplexed_async_connection().await.unwrap());
    }
    raws
}
