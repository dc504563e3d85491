struct Order {
    id: u64,
}

#[distlock::locked(name = "orders/{order.id}")]
async fn ship(order: &Order) -> distlock::Result<u64> {
    Ok(order.id)
}

fn main() {}
