//! The news a release sends a client's waiters besides a bare wake-up: a lock handed
//! straight on to one of them (`<token> <fencing token> <server ms>`), or a lock handed to
//! the waiter ahead of one, which it is to look at once that grant's claim would have
//! lapsed unconfirmed (`<token> watch <claim ms>`). Kept by request token until its
//! waiter's next poll or wait takes it (see `hand_on` in the scripts' helpers).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use distlock_core::backend::LocalWakers;
use tokio::time::Instant;

/// News older than this is of a request that is no longer waiting (cancelled as the news
/// came): dropped when more comes.
const KEEP_FOR: Duration = Duration::from_secs(60);

/// What a release told one waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum News {
    /// The lock is the waiter's, with this fencing token, granted at `server_ms` on the
    /// server's clock.
    Granted { fence: u64, server_ms: u64 },
    /// The waiter ahead was handed the lock: look again at `at`, when its claim would have
    /// lapsed had it not confirmed it.
    Watch { at: Instant },
}

/// The news of one client's waiters, by request token.
#[derive(Debug, Default)]
pub(crate) struct Handovers {
    news: Mutex<HashMap<String, (News, Instant)>>,
}

impl Handovers {
    /// Takes a message of a client's wake-up channel: news is kept for its waiter, which is
    /// woken. False for a message that is no news (a bare wake-up, a token alone).
    pub(crate) fn deliver(&self, payload: &str, wakers: &LocalWakers) -> bool {
        let Some((token, news)) = parse(payload) else {
            return false;
        };
        let now = Instant::now();
        {
            let mut kept = self.news.lock().unwrap_or_else(|p| p.into_inner());
            kept.retain(|_, (_, since)| now.duration_since(*since) < KEEP_FOR);
            // A grant is not overwritten by a watch that arrives after it.
            let entry = kept.entry(token.to_owned()).or_insert((news, now));
            if !matches!(entry.0, News::Granted { .. }) {
                *entry = (news, now);
            }
        }
        wakers.wake(token);
        true
    }

    /// Takes the news kept for `token`.
    pub(crate) fn take(&self, token: &str) -> Option<News> {
        let mut kept = self.news.lock().unwrap_or_else(|p| p.into_inner());
        // Every poll asks, and there is seldom news: no hashing of the token for nothing.
        if kept.is_empty() {
            return None;
        }
        kept.remove(token).map(|(news, _)| news)
    }

    /// The grant kept for `token`, left in place; a watch is taken.
    pub(crate) fn grant_or_watch(&self, token: &str) -> Option<News> {
        let mut kept = self.news.lock().unwrap_or_else(|p| p.into_inner());
        if kept.is_empty() {
            return None;
        }
        match kept.get(token) {
            Some((News::Watch { .. }, _)) => kept.remove(token).map(|(news, _)| news),
            other => other.map(|(news, _)| *news),
        }
    }
}

/// `<token> <fence> <server ms>` or `<token> watch <claim ms>`.
fn parse(payload: &str) -> Option<(&str, News)> {
    let mut words = payload.split(' ');
    let (token, first, second) = (words.next()?, words.next()?, words.next()?);
    if words.next().is_some() {
        return None;
    }
    let news = match first {
        "watch" => News::Watch {
            at: Instant::now() + Duration::from_millis(second.parse().ok()?),
        },
        fence => News::Granted {
            fence: fence.parse().ok().filter(|fence| *fence > 0)?,
            server_ms: second.parse().ok()?,
        },
    };
    Some((token, news))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_and_watches_parse_and_nothing_else_does() {
        assert_eq!(
            parse("ab12 77 1700000000123"),
            Some((
                "ab12",
                News::Granted {
                    fence: 77,
                    server_ms: 1_700_000_000_123
                }
            ))
        );
        assert!(matches!(
            parse("ab12 watch 50"),
            Some(("ab12", News::Watch { .. }))
        ));
        for other in [
            "ab12",
            "ab12 0 5",
            "ab12 x 5",
            "ab12 7",
            "ab12 7 5 9",
            "",
            "a watch -1",
        ] {
            assert_eq!(parse(other), None, "{other}");
        }
    }

    #[tokio::test]
    async fn a_grant_outlives_a_later_watch_and_is_taken_once() {
        let handovers = Handovers::default();
        let wakers = LocalWakers::new();
        assert!(handovers.deliver("t 9 100", &wakers));
        assert!(handovers.deliver("t watch 50", &wakers));
        assert!(!handovers.deliver("t", &wakers));
        let granted = News::Granted {
            fence: 9,
            server_ms: 100,
        };
        assert_eq!(handovers.grant_or_watch("t"), Some(granted));
        assert_eq!(handovers.take("t"), Some(granted));
        assert_eq!(handovers.take("t"), None);
        assert!(handovers.deliver("u watch 50", &wakers));
        assert!(matches!(
            handovers.grant_or_watch("u"),
            Some(News::Watch { .. })
        ));
        assert_eq!(handovers.grant_or_watch("u"), None);
    }
}
