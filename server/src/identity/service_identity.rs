//! ServiceIdentity: work that belongs to a service of the platform or of one organization,
//! not to a member. It runs on the same engine (store, command keys, outbox, events,
//! recovery) under a service scope of its own:
//!
//! - its command keys never meet a member's (the scope is part of every key);
//! - member use cases take a [`super::Caller`], which a service never has, so a service
//!   cannot enter a member workflow, and no token or cookie turns into a service;
//! - the public API shows an execution only to the scope that owns it, so organization
//!   endpoints never read platform work.

use uuid::Uuid;

use crate::store::Scope;

/// Who owns a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceOwner {
    /// The platform itself.
    Platform,
    /// One organization.
    Organization(Uuid),
}

/// A service doing work for its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceIdentity {
    /// Whose service it is.
    pub owner: ServiceOwner,
    /// The service's name, e.g. `reminders`: lowercase letters, digits and `-`.
    pub name: String,
}

/// A service name that breaks the naming rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a service name has 1-64 lowercase letters, digits or `-`")]
pub struct InvalidServiceName;

impl ServiceIdentity {
    /// A service of `owner` named `name`.
    pub fn new(owner: ServiceOwner, name: &str) -> Result<Self, InvalidServiceName> {
        let valid = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !valid {
            return Err(InvalidServiceName);
        }
        Ok(Self {
            owner,
            name: name.to_string(),
        })
    }

    /// The storage scope of the service's work: apart from every member and every other
    /// service, and from the same service of another organization.
    pub fn scope(&self) -> Scope {
        match self.owner {
            ServiceOwner::Platform => Scope::Service(format!("platform/{}", self.name)),
            ServiceOwner::Organization(id) => Scope::Service(format!("org-{id}/{}", self.name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_service_of_two_owners_has_two_scopes() {
        let a = ServiceIdentity::new(ServiceOwner::Organization(Uuid::now_v7()), "reminders");
        let b = ServiceIdentity::new(ServiceOwner::Organization(Uuid::now_v7()), "reminders");
        let platform = ServiceIdentity::new(ServiceOwner::Platform, "reminders");
        let scopes: Vec<Scope> = [a, b, platform]
            .into_iter()
            .map(|s| s.map(|s| s.scope()).unwrap_or(Scope::Member(String::new())))
            .collect();
        assert_ne!(scopes[0], scopes[1]);
        assert_ne!(scopes[0], scopes[2]);
        assert!(matches!(scopes[2], Scope::Service(_)));
    }

    #[test]
    fn a_service_name_is_checked() {
        assert_eq!(
            ServiceIdentity::new(ServiceOwner::Platform, "Not Valid"),
            Err(InvalidServiceName)
        );
        assert_eq!(
            ServiceIdentity::new(ServiceOwner::Platform, ""),
            Err(InvalidServiceName)
        );
    }
}
