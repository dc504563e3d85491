//! The scripts that grant in Redisson's layout, put together, and what a try tells them
//! of the request's record for `status`.

use distlock_core::backend::Ticket;

use super::pubsub::LayoutScript;
use super::{Waiting, layout};

/// The helpers of this layout's grants (plain and fair), put before the scripts that
/// grant.
pub(super) const GRANTS: &str = include_str!("../scripts/redisson_grant.lua");

/// An acquire script: its `helpers`, then its `body` as the function `try_grant`, whose
/// grant also drops the waiter's record for `status` (see [`Recorded`]), saving a
/// granted waiter a round trip.
pub(super) fn acquire_script(helpers: &[&str], body: &str) -> LayoutScript {
    let mut source = helpers.join("\n");
    source.push_str("\nlocal function try_grant()\n");
    source.push_str(body);
    source.push_str("\nend\n");
    source.push_str(include_str!("../scripts/redisson_granted.lua"));
    LayoutScript::new(&source)
}

/// What a try tells its acquire script of the request's record for `status`, which a
/// grant drops: the lock's waiter records (the script's last two keys) and the request's
/// token (its last argument; empty when no record was written).
pub(super) struct Recorded {
    keys: [String; 2],
    pub(super) token: String,
}

impl Recorded {
    /// What `ticket`'s try tells its acquire script.
    pub(super) fn of(ticket: &Ticket) -> Recorded {
        let request = &ticket.request;
        let noted = ticket
            .state::<Waiting>()
            .is_some_and(|w| w.since_ms.is_some());
        Recorded {
            keys: layout::waiting_keys(&request.name),
            token: match noted {
                true => request.token.clone(),
                false => String::new(),
            },
        }
    }

    /// A script's `keys`, then the waiter records'.
    pub(super) fn keys<'a>(&'a self, keys: &[&'a str]) -> Vec<&'a str> {
        let mut all = keys.to_vec();
        all.extend(self.keys.iter().map(String::as_str));
        all
    }
}
