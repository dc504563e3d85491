#[distlock::locked(client = locks, name = "orders/{id}", wait = "5 parsecs")]
async fn ship(locks: &distlock::Client, id: u64) -> distlock::Result<u64> {
    Ok(id)
}

fn main() {}
