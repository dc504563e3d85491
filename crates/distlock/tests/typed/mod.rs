//! What must hold for any input a user can type, checked here by property tests and, with
//! this same file, by the fuzz targets in `fuzz/`: a lock URL, a lock name and a duration
//! are parsed without a panic, and nothing that comes back shows a password.

use std::time::Duration;

use distlock::{ErrorKind, LockOptions};

/// Parses `text` as a lock URL and as every backend's configuration (no connection is
/// made): nothing panics, every refusal is bad input, and neither an error nor a parsed
/// configuration shows the URL's password.
pub fn url_holds(text: &str) {
    let url = match distlock_core::parse_lock_url(text) {
        Ok(url) => url,
        Err(err) => return refused_without_secrets(err, raw_password(text).as_deref(), text),
    };
    let password = url.password();
    let query_password = query_password(url.as_str());
    let shown: Vec<Result<String, distlock::Error>> = vec![
        distlock::redis::RedisConfig::from_url(&url).map(|c| format!("{c:?}")),
        distlock::redis::RedlockConfig::from_url(&url).map(|c| format!("{c:?}")),
        distlock::sql::postgres::PostgresConfig::from_url(&url).map(|c| format!("{c:?}")),
        distlock::sql::mysql::MysqlConfig::from_url(&url).map(|c| format!("{c:?}")),
        distlock::sql::sqlite::SqliteConfig::from_url(&url).map(|c| format!("{c:?}")),
        distlock::zookeeper::ZkConfig::from_url(&url).map(|c| format!("{c:?}")),
        distlock::etcd::EtcdConfig::from_url(&url).map(|c| format!("{c:?}")),
    ];
    for parsed in shown {
        let message = match parsed {
            Ok(debug) => debug,
            Err(err) => {
                let message = format!("{err} {err:?}");
                refused_without_secrets(err, password, url.as_str());
                message
            }
        };
        assert!(!shows(&message, password, url.as_str()), "{message}");
        assert!(!shows(&message, query_password, url.as_str()), "{message}");
    }
}

/// `err` is bad input and does not show `password` (of `text`).
fn refused_without_secrets(err: distlock::Error, password: Option<&str>, text: &str) {
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let message = format!("{err} {err:?}");
    assert!(!shows(&message, password, text), "{message}");
}

/// The password of text that is no URL, as a user would read it: after `scheme://` (or
/// from the start), the user information runs to the last `@` of the authority, and the
/// password follows the user name's first `:`.
fn raw_password(text: &str) -> Option<String> {
    let rest = text.split_once("://").map_or(text, |(_, rest)| rest);
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let (userinfo, _) = authority.rsplit_once('@')?;
    Some(userinfo.split_once(':')?.1.to_owned())
}

/// The value of a `password` query parameter as written in `text`, which PostgreSQL's
/// driver reads (decoding the key: `pass%77ord` is `password`).
fn query_password(text: &str) -> Option<&str> {
    let (_, query) = text.split_once('?')?;
    let query = query.split('#').next()?;
    query.split('&').find_map(|parameter| {
        let (key, value) = parameter.split_once('=')?;
        let decoded = distlock::Url::parse(&format!("q://h/?{key}=")).ok()?;
        let (decoded, _) = decoded.query_pairs().next()?;
        decoded.eq_ignore_ascii_case("password").then_some(value)
    })
}

/// Whether `message` shows `password`: one long enough to tell, and found nowhere else in
/// the URL `text` (a password `0` would be "shown" by any port number, and `%00%00%` by a
/// user name `8%00%00%00`).
fn shows(message: &str, password: Option<&str>, text: &str) -> bool {
    let Some(password) = password.filter(|p| p.len() >= 6) else {
        return false;
    };
    let elsewhere =
        text.replacen(&format!(":{password}@"), ":@", 1)
            .replacen(&format!("={password}"), "=", 1);
    !elsewhere.contains(password) && message.contains(password)
}

/// Parses `text` as a duration the way the command line does, and puts the result into
/// every lock option and every URL parameter that takes a duration: nothing panics, and a
/// memory lock with those options is either taken or refused as bad input.
pub fn duration_holds(text: &str) {
    for (scheme, parameter) in [
        ("redis://127.0.0.1:6379/0", "fence_ttl"),
        (
            "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/0",
            "node_timeout",
        ),
        ("postgres://127.0.0.1/db", "connect_timeout"),
        ("zk://127.0.0.1:2181/base", "session_timeout"),
        ("etcd://127.0.0.1:2379/prefix", "session_ttl"),
    ] {
        let encoded: String = url::form_urlencoded::byte_serialize(text.as_bytes()).collect();
        url_holds(&format!("{scheme}?{parameter}={encoded}"));
    }
    let Ok(duration) = humantime::parse_duration(text) else {
        return;
    };
    let options = [
        LockOptions::new().ttl(duration),
        LockOptions::new().wait(duration),
        LockOptions::new().renew_every(duration),
        LockOptions::new().max_hold(duration),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = distlock::Client::connect("memory://").await.unwrap();
        for options in options {
            let attempt = tokio::time::timeout(
                Duration::from_secs(5),
                client.mutex("fuzzed").with_options(options).lock(),
            )
            .await
            .expect("an uncontended lock is answered at once");
            match attempt {
                // A guard past a tiny `max_hold` may be gone already.
                Ok(guard) => drop(guard.release().await),
                Err(err) => assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}"),
            }
        }
        let bounded = tokio::time::timeout(
            Duration::from_secs(5),
            client.mutex("fuzzed").lock_timeout(duration),
        )
        .await
        .expect("an uncontended lock is answered at once");
        if let Ok(guard) = bounded {
            drop(guard.release().await);
        }
    });
}

/// Checks `name` as a lock name: nothing panics; it is accepted exactly when it has 1 to
/// 1,024 bytes and no control character; an accepted name has a MySQL lock key of at most
/// 64 characters (itself when it fits).
pub fn name_holds(name: &str) {
    let valid = !name.is_empty() && name.len() <= 1024 && !name.chars().any(char::is_control);
    match distlock_core::validate_name(name) {
        Ok(()) => assert!(valid, "{name:?} accepted"),
        Err(err) => {
            assert!(!valid, "{name:?} refused: {err}");
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            return;
        }
    }
    let key = distlock::sql::mysql::lock_key(name);
    assert!(key.chars().count() <= 64, "{key}");
    if name.chars().count() <= 64 {
        assert_eq!(key, name);
    }
}
