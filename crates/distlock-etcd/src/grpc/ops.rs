//! The requests and conditions the backend's transactions are made of, and what their
//! answers hold.

use super::pb::{self, compare, request_op, response_op};

/// The end of the range of every key starting with `prefix`: the prefix with its last byte
/// that is not 0xff increased (and what followed it dropped); `\0` (every key) when all are.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// A read of every key under `prefix`, at most `limit` of them (0: all).
pub(crate) fn range_prefix(prefix: &str, limit: i64) -> pb::RangeRequest {
    pb::RangeRequest {
        key: prefix.as_bytes().to_vec(),
        range_end: prefix_end(prefix.as_bytes()),
        limit,
        ..Default::default()
    }
}

/// A read of `key` alone.
pub(crate) fn range_key(key: &str) -> pb::RangeRequest {
    pb::RangeRequest {
        key: key.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// A transaction's read.
pub(crate) fn get(range: pb::RangeRequest) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(request_op::Request::RequestRange(range)),
    }
}

/// A transaction's write of `key` with `value`, on lease `lease` (0: none).
pub(crate) fn put(key: &str, value: &[u8], lease: i64) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(request_op::Request::RequestPut(pb::PutRequest {
            key: key.as_bytes().to_vec(),
            value: value.to_vec(),
            lease,
        })),
    }
}

/// A transaction's deletion of `key`.
pub(crate) fn delete(key: &str) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(request_op::Request::RequestDeleteRange(
            pb::DeleteRangeRequest {
                key: key.as_bytes().to_vec(),
                range_end: Vec::new(),
            },
        )),
    }
}

/// The condition "`key` was created at revision `revision`" (0: `key` does not exist).
pub(crate) fn created_at(key: &str, revision: i64) -> pb::Compare {
    pb::Compare {
        result: compare::CompareResult::Equal.into(),
        target: compare::CompareTarget::Create.into(),
        key: key.as_bytes().to_vec(),
        target_union: Some(compare::TargetUnion::CreateRevision(revision)),
        range_end: Vec::new(),
    }
}

/// The condition "no key exists under `prefix`": every key of the range has create
/// revision 0, which holds of an empty range alone.
pub(crate) fn none_under(prefix: &str) -> pb::Compare {
    pb::Compare {
        range_end: prefix_end(prefix.as_bytes()),
        ..created_at(prefix, 0)
    }
}

/// The condition "`key` was last written at revision `revision`".
pub(crate) fn modified_at(key: &str, revision: i64) -> pb::Compare {
    pb::Compare {
        target: compare::CompareTarget::Mod.into(),
        target_union: Some(compare::TargetUnion::ModRevision(revision)),
        ..created_at(key, 0)
    }
}

/// The condition "`key` was written after revision `revision`".
pub(crate) fn modified_after(key: &str, revision: i64) -> pb::Compare {
    pb::Compare {
        result: compare::CompareResult::Greater.into(),
        ..modified_at(key, revision)
    }
}

/// The condition "`key` lives on lease `lease`".
pub(crate) fn leased_to(key: &str, lease: i64) -> pb::Compare {
    pb::Compare {
        target: compare::CompareTarget::Lease.into(),
        target_union: Some(compare::TargetUnion::Lease(lease)),
        ..created_at(key, 0)
    }
}

/// The conditions "`key` is the one created at revision `created`, on lease `lease`": a
/// held contender key still this holder's (an adoption moves it to the adopter's lease,
/// keeping its create revision and so its place).
pub(crate) fn held_by(key: &str, created: i64, lease: i64) -> Vec<pb::Compare> {
    vec![created_at(key, created), leased_to(key, lease)]
}

/// The conditions "`key` is still this request's": for a granted key, that it was last
/// written by its grant (revision `granted`: an adoption writes it again); for a queued
/// one, that it is the one created at `created` on lease `lease`; none for a key whose
/// create was not answered (`created` 0: never granted, never adopted).
pub(crate) fn still_of(key: &str, created: i64, granted: i64, lease: i64) -> Vec<pb::Compare> {
    match (created, granted) {
        (_, granted) if granted > 0 => vec![modified_at(key, granted)],
        (0, _) => Vec::new(),
        (created, _) => held_by(key, created, lease),
    }
}

/// A transaction: `success` if every condition of `when` holds, else `failure`.
pub(crate) fn txn(
    when: Vec<pb::Compare>,
    success: Vec<pb::RequestOp>,
    failure: Vec<pb::RequestOp>,
) -> pb::TxnRequest {
    pb::TxnRequest {
        compare: when,
        success,
        failure,
    }
}

/// The revision an answer was made at (0 without a header).
pub(crate) fn revision(header: Option<&pb::ResponseHeader>) -> i64 {
    header.map_or(0, |h| h.revision)
}

/// The reads of a transaction's answer, in order.
pub(crate) fn reads(answer: pb::TxnResponse) -> Vec<Vec<pb::KeyValue>> {
    answer
        .responses
        .into_iter()
        .filter_map(|op| match op.response {
            Some(response_op::Response::ResponseRange(range)) => Some(range.kvs),
            _ => None,
        })
        .collect()
}

/// How many keys a transaction's answer says it deleted.
pub(crate) fn deleted(answer: &pb::TxnResponse) -> i64 {
    answer
        .responses
        .iter()
        .map(|op| match &op.response {
            Some(response_op::Response::ResponseDeleteRange(delete)) => delete.deleted,
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_past_every_key_under_it() {
        assert_eq!(prefix_end(b"a/b/"), b"a/b0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
        assert_eq!(prefix_end(b""), b"\0");
    }
}
