#[distlock::job(client = locks, name = "jobs/{id}", on_busy = "skip")]
async fn report(locks: &distlock::Client, id: u64) -> distlock::Result<distlock::JobOutcome<u64>> {
    Ok(id)
}

fn main() {}
