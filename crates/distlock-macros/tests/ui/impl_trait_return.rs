#[distlock::locked(client = locks, name = "orders/{id}")]
async fn ship(locks: &distlock::Client, id: u64) -> distlock::Result<impl std::fmt::Display> {
    Ok(id)
}

fn main() {}
