//! News of a lock for its observers: etcd watches on the lock's contender keys and on its
//! note, each event a change of the channel's count, kept while a receiver lives.

use std::sync::Weak;

use tokio::sync::watch;

use crate::grpc::ops;
use crate::grpc::pb;
use crate::session::Sessions;

/// Starts watching the keys under `pfx` (the lock's contenders) and the key `note`: the
/// receiver of the count of events seen.
pub(crate) fn start(sessions: Weak<Sessions>, pfx: String, note: String) -> watch::Receiver<u64> {
    crate::runtime::SESSIONS.follow_news(move |count| {
        let (sessions, pfx, note) = (sessions.clone(), pfx.clone(), note.clone());
        async move { follow(&sessions, &pfx, &note, &count).await }
    })
}

/// Follows both watches until one ends (the stream broke, etcd cancelled it, or the
/// client is gone), counting each answer that carries events. A watch set again tells of
/// a change, in case one went unseen while it was down.
async fn follow(sessions: &Weak<Sessions>, pfx: &str, note: &str, sender: &watch::Sender<u64>) {
    let Some(this) = sessions.upgrade() else {
        return std::future::pending().await;
    };
    let watches = this.watches.clone();
    drop(this);
    let watch = |key: &str, range_end: Vec<u8>| {
        watches.watch(pb::WatchCreateRequest {
            key: key.as_bytes().to_vec(),
            range_end,
            ..Default::default()
        })
    };
    let (Ok(mut contenders), Ok(mut noted)) = (
        watch(pfx, ops::prefix_end(pfx.as_bytes())),
        watch(note, Vec::new()),
    ) else {
        return;
    };
    sender.send_modify(|count| *count += 1);
    loop {
        let answer = tokio::select! {
            answer = contenders.message() => answer,
            answer = noted.message() => answer,
        };
        match answer {
            Ok(answer) if answer.canceled => return,
            Ok(answer) if !answer.events.is_empty() => sender.send_modify(|count| *count += 1),
            Ok(_) => {}
            Err(_) => return,
        }
    }
}
