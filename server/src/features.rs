//! Capabilities that plug in by themselves: each registers what it needs at run time (its
//! store, say) under its own type, and reads it back by that type, so that the central types
//! (`node::Database`, the HTTP state) do not grow a field per capability.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

/// What the capabilities registered, by type. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct Features(Arc<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>);

impl Features {
    /// These features with `value` registered under its type (replacing an earlier one).
    pub fn with<T: Any + Send + Sync>(self, value: T) -> Self {
        let mut map = Arc::unwrap_or_clone(self.0);
        map.insert(TypeId::of::<T>(), Arc::new(value));
        Self(Arc::new(map))
    }

    /// What was registered under `T`, if anything.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.0.get(&TypeId::of::<T>())?.downcast_ref::<T>()
    }
}

impl std::fmt::Debug for Features {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Features")
            .field("registered", &self.0.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::Features;

    #[test]
    fn a_feature_is_read_back_by_its_type_and_another_type_finds_nothing() {
        let features = Features::default().with(7_u32).with("operator");
        assert_eq!(features.get::<u32>(), Some(&7));
        assert_eq!(features.get::<&str>(), Some(&"operator"));
        assert_eq!(features.get::<u64>(), None);
    }
}
