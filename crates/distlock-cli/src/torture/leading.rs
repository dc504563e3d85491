//! The election scheme's worker: a candidate that stands with `requeue` and does each
//! term's work under [`Election::run`](distlock::Election::run), which cancels the work at
//! a loss and campaigns again. Every term is recorded as a mutex's hold is: its grant
//! (the term as token), its health, and its release, or its loss and the campaign that
//! follows.

use distlock::{Leadership, Result};
use distlock_check::history::{What, instant_ns, monotonic_ns};

use super::record::Recorder;
use super::resource::Writer;
use super::scheme::{close_client, waiting_until};
use super::steps::{self, Orders};
use super::worker::{Section, Stop, Task, acquire_failed, interrupted, me_of};
use crate::location::open_client;

/// Stands for election until the run's end: each round, `Election::run` with `requeue`
/// does one term's work (and more terms after each loss), then resigns.
pub(super) async fn lead(
    task: &Task,
    orders: &Orders,
    recorder: &Recorder,
    resource: &mut Writer,
) -> Result<()> {
    let client = open_client(&task.url).await?;
    let election = client
        .election(task.name.as_str())
        .identity(me_of(task))
        .requeue(true);
    let me = task.worker;
    let section = Section {
        task,
        orders,
        recorder,
    };
    // The client is closed however the loop ends (see `close_client`).
    let ran: Result<()> = async {
        while monotonic_ns() < task.until && !orders.stopped() {
            recorder.record(me, What::Acquire);
            let options = waiting_until(task.until).ttl(task.ttl).fair(task.fair);
            let candidate = election.clone().with_options(options);
            let terms =
                candidate.run(async |leading: &Leadership| term(leading, &section, resource).await);
            let ran = tokio::select! {
                ran = terms => ran,
                () = orders.stop_ordered() => Err(Stop::Store(interrupted())),
            };
            let err = match ran {
                Ok(()) => {
                    recorder.record(
                        me,
                        What::Released {
                            outcome: "ok".into(),
                        },
                    );
                    continue;
                }
                Err(Stop::Section(err)) => return Err(err),
                Err(Stop::Store(err)) => err,
            };
            // `run` campaigns again by itself after a loss or a store out of reach; what comes
            // out is the deadline, or a refusal that ends the worker.
            acquire_failed(recorder, me, err).await?;
        }
        Ok(())
    }
    .await;
    close_client(&client).await;
    ran
}

/// One term's work: the section (the term written to the resource first), recorded as a
/// hold; cancelled by `run` at the loss.
async fn term(
    leading: &Leadership,
    section: &Section<'_>,
    resource: &mut Writer,
) -> std::result::Result<(), Stop> {
    let (recorder, me) = (section.recorder, section.task.worker);
    let token = leading.term();
    recorder.record(
        me,
        What::Granted {
            token,
            safe_until: instant_ns(leading.safe_until()),
        },
    );
    let mut cut = CutShort {
        recorder,
        me,
        armed: true,
    };
    section.orders.at(steps::AFTER_GRANT, recorder, me);
    let done = section
        .watched(leading.guard(), token, None, resource)
        .await;
    done.map_err(Stop::Section)?;
    section.released();
    cut.armed = false;
    Ok(())
}

/// Records, when a term's work is dropped before it ended (`run` cancels it at the loss,
/// or the run ends), the loss, and the campaign that `requeue` starts next.
struct CutShort<'a> {
    recorder: &'a Recorder,
    me: u32,
    armed: bool,
}

impl Drop for CutShort<'_> {
    fn drop(&mut self) {
        if self.armed {
            let lost = What::Health {
                health: "lost".into(),
            };
            self.recorder.record(self.me, lost);
            self.recorder.record(self.me, What::Acquire);
        }
    }
}
