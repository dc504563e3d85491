#[derive(Debug)]
struct ShipError;

#[distlock::locked(client = locks, name = "orders/{id}")]
async fn ship(locks: &distlock::Client, id: u64) -> Result<u64, ShipError> {
    Ok(id)
}

fn main() {}
