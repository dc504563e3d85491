#[distlock::job(client = locks, name = "jobs/{id}", at_least = "1m")]
async fn report(locks: &distlock::Client, id: u64) -> distlock::Result<u64> {
    Ok(id)
}

fn main() {}
