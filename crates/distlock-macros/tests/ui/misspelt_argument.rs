struct Order {
    id: u64,
}

#[distlock::locked(client = locks, name = "orders/{ordr.id}")]
async fn ship(locks: &distlock::Client, order: &Order) -> distlock::Result<u64> {
    Ok(order.id)
}

fn main() {}
