//! The workers' links to the store, for link faults: each worker reaches the one server
//! of the URL through a fault proxy of its own (distlock-servers'), which the coordinator can
//! cut (close every connection and refuse new ones) or black-hole (keep connections open,
//! forward nothing) and heal.

use std::net::{SocketAddr, ToSocketAddrs};

use distlock::{Error, Result, Url};

/// Where the one server of `url` listens, and a URL to reach it through a proxy at an
/// address to fill in.
#[derive(Clone)]
pub struct Link {
    url: Url,
    /// The server the proxies forward to.
    pub server: SocketAddr,
}

/// `url` parsed, if it names one server (distlock's parser takes a list of hosts, which
/// URLs cannot hold, into a `hosts` query parameter).
pub fn one_server(url: &str) -> Option<Url> {
    distlock::parse_lock_url(url)
        .ok()
        .filter(|parsed| !parsed.query_pairs().any(|(key, _)| key == "hosts"))
}

impl Link {
    /// The link of `url`, which must name one server over TCP.
    pub fn of(url: &str) -> Result<Link> {
        let refuse = |why: &str| {
            Error::invalid(format!(
                "link faults go between a worker and one server over TCP; {} {why}",
                distlock::redact_url(url)
            ))
        };
        let parsed = one_server(url).ok_or_else(|| refuse("names several servers, or none"))?;
        // A proxy on another address breaks a certificate's host name check, and a host
        // named in the query goes around the proxy.
        let tls = matches!(parsed.scheme(), "rediss" | "etcds" | "zks")
            || parsed.query_pairs().any(|(key, value)| {
                matches!(key.as_ref(), "sslmode" | "ssl-mode" | "ssl_mode")
                    && value.to_ascii_lowercase().starts_with("verify")
            });
        if tls {
            return Err(refuse(
                "verifies its server's certificate by name, which a proxy breaks",
            ));
        }
        if parsed
            .query_pairs()
            .any(|(key, _)| matches!(key.as_ref(), "host" | "hostaddr" | "port" | "socket"))
        {
            return Err(refuse("names its server in the query, around the proxy"));
        }
        // A scheme of a backend outside distlock's crates has no known port: its URL names
        // it.
        let default_port = match parsed.scheme() {
            "redis" | "rediss" => Some(6379),
            "postgres" | "postgresql" => Some(5432),
            "mysql" | "mariadb" => Some(3306),
            "etcd" | "etcds" => Some(2379),
            "zk" | "zks" => Some(2181),
            _ => None,
        };
        let host = parsed
            .host_str()
            .filter(|host| !host.is_empty())
            .ok_or_else(|| refuse("names no host"))?;
        let port = parsed
            .port()
            .or(default_port)
            .ok_or_else(|| refuse("names no server's port"))?;
        // IPv4 first: `localhost` servers listen there.
        let mut addrs: Vec<SocketAddr> = (host.trim_matches(['[', ']']), port)
            .to_socket_addrs()
            .map(Iterator::collect)
            .unwrap_or_default();
        addrs.sort_by_key(|addr| !addr.is_ipv4());
        let server = *addrs
            .first()
            .ok_or_else(|| refuse("names a host that does not resolve"))?;
        Ok(Link {
            url: parsed,
            server,
        })
    }

    /// The URL with its server replaced by `proxy`.
    pub fn through(&self, proxy: SocketAddr) -> String {
        let mut url = self.url.clone();
        // Setting an IP host and a port on a URL that has a host cannot fail.
        let _ = url.set_ip_host(proxy.ip());
        let _ = url.set_port(Some(proxy.port()));
        url.to_string()
    }
}
