#[distlock::locked(client = locks, name = "orders/{id}")]
async fn ship(locks: &distlock::Client, id: u64) -> u64 {
    id
}

fn main() {}
