//! The grants a client holds, so [`Client::close`](crate::Client::close) can release them
//! all: each from its grant until it is released (or given up).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use crate::lease::LeaseCore;

/// The grants a client holds, by the address of their shared state.
#[derive(Default)]
pub(crate) struct HeldGrants {
    grants: Mutex<HashMap<usize, Weak<LeaseCore>>>,
}

impl HeldGrants {
    fn grants(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Weak<LeaseCore>>> {
        self.grants.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes a fresh grant.
    pub(crate) fn add(&self, core: &Arc<LeaseCore>) {
        self.grants()
            .insert(Arc::as_ptr(core) as usize, Arc::downgrade(core));
    }

    /// Forgets a grant that is being released.
    pub(crate) fn remove(&self, core: &LeaseCore) {
        self.grants().remove(&(std::ptr::from_ref(core) as usize));
    }

    /// Every grant still held.
    pub(crate) fn all(&self) -> Vec<Arc<LeaseCore>> {
        self.grants().values().filter_map(Weak::upgrade).collect()
    }
}
