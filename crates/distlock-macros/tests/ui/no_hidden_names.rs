// The expansion's own variables are not the body's to see.
#[distlock::locked(client = locks, name = "orders/{id}")]
async fn ship(locks: &distlock::Client, id: u64) -> distlock::Result<String> {
    Ok(__distlock_name)
}

fn main() {}
