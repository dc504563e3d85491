//! Property tests of what a user can type: lock URLs, lock names and durations, as random
//! text and as text shaped like the real thing (the fuzz targets in `fuzz/` check the same
//! properties, from `typed/mod.rs`, for as long as they are run).

mod typed;

use proptest::prelude::*;

const SCHEMES: [&str; 13] = [
    "redis",
    "rediss",
    "redis+cluster",
    "redlock",
    "redlocks",
    "postgres",
    "mysql",
    "mariadb",
    "sqlite",
    "zk",
    "zks",
    "etcd",
    "memory",
];

const PARAMETERS: [&str; 14] = [
    "prefix",
    "fence_ttl",
    "node_timeout",
    "tls_ca",
    "mode",
    "pool",
    "connect_timeout",
    "sslmode",
    "session_timeout",
    "session_ttl",
    "min_replicas",
    "hosts",
    "ssl-mode",
    "x",
];

fn url_shaped() -> impl Strategy<Value = String> {
    (
        prop::sample::select(SCHEMES.to_vec()),
        "([a-z]{1,4}(:[^/?#]{0,10})?@)?",
        "([a-z0-9.\\[\\]:]{0,12})(,[a-z0-9.:]{0,8}){0,3}",
        "(/[a-z0-9%/.]{0,8})?",
        prop::collection::vec(
            (prop::sample::select(PARAMETERS.to_vec()), "[ -~]{0,8}"),
            0..3,
        ),
    )
        .prop_map(|(scheme, userinfo, hosts, path, query)| {
            let query: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{scheme}://{userinfo}{hosts}{path}?{}", query.join("&"))
        })
}

proptest! {
    #[test]
    fn any_text_as_a_url_is_parsed_or_refused_without_showing_a_password(text in any::<String>()) {
        typed::url_holds(&text);
    }

    #[test]
    fn url_shaped_text_is_parsed_or_refused_without_showing_a_password(text in url_shaped()) {
        typed::url_holds(&text);
    }

    #[test]
    fn a_password_of_any_characters_is_never_shown(
        scheme in prop::sample::select(SCHEMES.to_vec()),
        password in "[^@/?#]{6,16}",
        query in "(\\?[a-z_]{1,10}=[a-z0-9]{0,4})?",
        in_query in any::<bool>(),
    ) {
        let encoded: String = url::form_urlencoded::byte_serialize(password.as_bytes()).collect();
        typed::url_holds(&format!("{scheme}://app:{encoded}@127.0.0.1:1/db{query}"));
        typed::url_holds(&format!("{scheme}://app:{password}@127.0.0.1:1/db{query}"));
        if in_query {
            let glue = if query.is_empty() { "?" } else { "&" };
            typed::url_holds(&format!("{scheme}://app@127.0.0.1:1/db{query}{glue}password={encoded}"));
        }
    }

    #[test]
    fn any_text_as_a_duration_is_parsed_or_refused(text in any::<String>()) {
        typed::duration_holds(&text);
    }

    #[test]
    fn duration_shaped_text_is_held_or_refused(
        number in prop_oneof![0u64..2_000, any::<u64>()],
        unit in prop::sample::select(vec!["ns", "us", "ms", "s", "m", "h", "d", "w", "M", "y", ""]),
    ) {
        typed::duration_holds(&format!("{number}{unit}"));
    }

    #[test]
    fn any_text_as_a_name_is_accepted_exactly_when_backends_can_store_it(name in any::<String>()) {
        typed::name_holds(&name);
    }

    #[test]
    fn long_names_and_names_near_the_limits(name in "[a-zé/ {}%.\\x00\\n]{60,70}|x{1020,1030}") {
        typed::name_holds(&name);
    }
}

/// Inputs the fuzzers and reviews found, kept: each once failed a check.
#[test]
fn inputs_found_before_still_hold() {
    // `://` in a query of text with another scheme: the URL's own password is what counts.
    typed::url_holds("l:Y\0@\u{6}\0\0\0\0\0\0\0d :?\u{6}\u{6}dddo://,,3:%m,,,b,H@%");
    // A password whose encoding is part of the user name's.
    typed::url_holds("o://8\n\0\0\0\0:\0\0%@\u{39d}");
    // No scheme at all, or no `//` after it: the password is hidden all the same.
    typed::url_holds("app:hunter2-secret@db:5432/locks");
    typed::url_holds("postgres:app:hunter2-secret@db/locks");
    typed::url_holds("postgres:/app:hunter2-secret@db/locks");
    // A password in the query, which PostgreSQL's driver reads (a review found it shown).
    typed::url_holds("postgres://app@db/locks?password=hunter2-secret&pool=x");
    typed::url_holds("postgres://app@db/locks?password=hunter2-secret");
}
