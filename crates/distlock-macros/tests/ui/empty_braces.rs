#[distlock::locked(client = locks, name = "orders/{}")]
async fn ship(locks: &distlock::Client, id: u64) -> distlock::Result<u64> {
    Ok(id)
}

fn main() {}
