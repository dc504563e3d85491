#[distlock::locked(client = locks, name = "orders/{id}", on_busy = "skip")]
async fn ship(locks: &distlock::Client, id: u64) -> distlock::Result<u64> {
    Ok(id)
}

fn main() {}
