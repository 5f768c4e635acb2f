//! The outbound policy: which addresses a request to the outside may reach.
//!
//! Every outbound HTTP client of a server (model providers, HTTP tools, and what comes next:
//! MCP servers, OAuth endpoints, Channel APIs, webhooks) is built by
//! [`OutboundPolicy::client_builder`], so one rule decides for all of them:
//!
//! - The check is made on the **resolved address**: the client's DNS resolver drops every
//!   address the policy does not allow (so a name that resolves to both a public and an
//!   internal address connects only to the public one, and a name that only resolves to
//!   internal ones fails), and an address written in the URL itself is checked by
//!   [`OutboundPolicy::check_url`] before anything is sent.
//! - Internal addresses (loopback, private, link-local with the cloud metadata endpoints,
//!   carrier-grade NAT, unique-local, multicast, unspecified and reserved ranges, and IPv4
//!   addresses mapped into IPv6) are denied unless the operator allows them by name, by range,
//!   or with the words `loopback`, `private` (every internal range) or `any`.
//! - Redirects are never followed and proxies from the environment are not used, so neither
//!   can lead a request around the check.
//!
//! A standalone agent (`openbot run`, `memory://`) uses [`OutboundPolicy::allow_all`] for its
//! models: the person running it chooses their endpoints. The HTTP tools registered in a
//! `memory://` Client (`put_tool`) keep the server's default instead, internal addresses
//! denied, unless its connect options or `OPENBOT_OUTBOUND_ALLOW` (the server's variable)
//! allow more ([`OutboundPolicy::from_env`]).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

/// The variable that names the allow list, on a server and in `memory://`.
pub const ALLOW_VARIABLE: &str = "OPENBOT_OUTBOUND_ALLOW";

/// What an operator allows beyond the public internet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboundAllow {
    /// Every address, internal ones included.
    Any,
    /// Loopback addresses (`127.0.0.0/8`, `::1`).
    Loopback,
    /// Every internal range.
    Private,
    /// One host name, whatever it resolves to.
    Host(String),
    /// One range of addresses.
    Net(IpNet),
}

impl fmt::Display for OutboundAllow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Any => f.write_str("any"),
            Self::Loopback => f.write_str("loopback"),
            Self::Private => f.write_str("private"),
            Self::Host(host) => f.write_str(host),
            Self::Net(net) => write!(f, "{net}"),
        }
    }
}

/// An HTTP client of the policy could not be built (its TLS setup failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the outbound HTTP client cannot be built (its TLS setup failed)")]
pub struct ClientBuildError;

/// A request the policy does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutboundError {
    /// The destination is an internal address the operator did not allow.
    #[error(
        "the outbound policy does not allow requests to {host} ({address}): it is an internal address"
    )]
    Denied {
        /// The host as written in the URL.
        host: String,
        /// The address it is or resolved to.
        address: IpAddr,
    },
    /// The host resolved to no address, or to none the policy allows.
    #[error("the outbound policy allows no address of {0}")]
    NoAllowedAddress(String),
    /// The URL cannot be used.
    #[error("{0}")]
    InvalidUrl(String),
    /// An allow-list entry cannot be read.
    #[error(
        "`{0}` is not an outbound allow entry: use a host name, an address range like 10.0.0.0/8, loopback, private or any"
    )]
    InvalidEntry(String),
}

/// Which addresses outbound requests may reach. Cheap to share behind an [`Arc`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundPolicy {
    allow: Vec<OutboundAllow>,
}

impl Default for OutboundPolicy {
    /// Internal addresses denied, nothing allowed beyond the public internet.
    fn default() -> Self {
        Self::deny_internal(Vec::new())
    }
}

impl OutboundPolicy {
    /// Everything allowed: for a standalone agent whose endpoints the person running it chose.
    pub fn allow_all() -> Self {
        Self {
            allow: vec![OutboundAllow::Any],
        }
    }

    /// Internal addresses denied except what `allow` names.
    pub fn deny_internal(allow: Vec<OutboundAllow>) -> Self {
        Self { allow }
    }

    /// Reads a comma- or space-separated allow list (`loopback, 10.1.0.0/16, api.internal`);
    /// an empty list (or `none`) allows nothing internal.
    pub fn parse(list: &str) -> Result<Self, OutboundError> {
        let mut allow = Vec::new();
        for entry in list
            .split([',', ' '])
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            allow.push(match entry.to_ascii_lowercase().as_str() {
                "none" => continue,
                "any" => OutboundAllow::Any,
                "loopback" => OutboundAllow::Loopback,
                "private" => OutboundAllow::Private,
                lower => {
                    if let Ok(net) = lower.parse::<IpNet>() {
                        OutboundAllow::Net(net.trunc())
                    } else if let Ok(ip) = lower.parse::<IpAddr>() {
                        OutboundAllow::Net(IpNet::from(canonical(ip)))
                    } else if is_host_name(lower) {
                        OutboundAllow::Host(lower.trim_end_matches('.').to_string())
                    } else {
                        return Err(OutboundError::InvalidEntry(
                            entry.chars().take(100).collect(),
                        ));
                    }
                }
            });
        }
        Ok(Self { allow })
    }

    /// The policy `OPENBOT_OUTBOUND_ALLOW` names (the allow list of [`Self::parse`]), read
    /// through `env`; unset, the default (internal addresses denied).
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, OutboundError> {
        match env(ALLOW_VARIABLE) {
            Some(list) => Self::parse(&list),
            None => Ok(Self::default()),
        }
    }

    /// What the policy allows beyond the public internet.
    pub fn allowed(&self) -> &[OutboundAllow] {
        &self.allow
    }

    fn allows_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.');
        self.allow.iter().any(|a| match a {
            OutboundAllow::Any => true,
            OutboundAllow::Host(name) => name.eq_ignore_ascii_case(host),
            _ => false,
        })
    }

    /// Whether a request may go to `address`.
    pub fn allows(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        if !is_internal(address) {
            return true;
        }
        self.allow.iter().any(|a| match a {
            OutboundAllow::Any | OutboundAllow::Private => true,
            OutboundAllow::Loopback => address.is_loopback(),
            OutboundAllow::Net(net) => net.contains(&address),
            OutboundAllow::Host(_) => false,
        })
    }

    /// Checks a URL before it is used: `http` or `https`, a host, and, when the host is an
    /// address, one the policy allows. Host names are checked when they are resolved.
    pub fn check_url(&self, url: &str) -> Result<(), OutboundError> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| OutboundError::InvalidUrl(format!("`{}` is not a URL: {e}", cut(url))))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(OutboundError::InvalidUrl(format!(
                "`{}` must start with http:// or https://",
                cut(url)
            )));
        }
        let Some(host) = parsed.host_str() else {
            return Err(OutboundError::InvalidUrl(format!(
                "`{}` has no host",
                cut(url)
            )));
        };
        let Ok(address) = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        else {
            // A name: checked on each address it resolves to.
            return Ok(());
        };
        if self.allows(address) {
            Ok(())
        } else {
            Err(OutboundError::Denied {
                host: address.to_string(),
                address: canonical(address),
            })
        }
    }

    /// An HTTP client builder that keeps to this policy: its resolver drops addresses the
    /// policy does not allow, redirects are not followed and no proxy is used. Callers still
    /// check each URL with [`OutboundPolicy::check_url`] (an address in a URL is not resolved).
    pub fn client_builder(self: &Arc<Self>) -> reqwest::ClientBuilder {
        let builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        if self.allow.contains(&OutboundAllow::Any) {
            return builder;
        }
        builder.dns_resolver(Arc::new(PolicyResolver {
            policy: Arc::clone(self),
        }))
    }

    /// A client of this policy ([`Self::client_builder`]) that gives up connecting after
    /// `connect` and on a whole request after `total`. A client that cannot be built is an
    /// error, never a client without the policy.
    pub fn client(
        self: &Arc<Self>,
        connect: std::time::Duration,
        total: std::time::Duration,
    ) -> Result<reqwest::Client, ClientBuildError> {
        self.client_builder()
            .connect_timeout(connect)
            .timeout(total)
            .build()
            .map_err(|_| ClientBuildError)
    }

    /// The policy's own words when `error` (from a client of [`Self::client_builder`]) was a
    /// request it refused.
    pub fn refusal(error: &(dyn std::error::Error + 'static)) -> Option<String> {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(err) = cause {
            if let Some(refused) = err.downcast_ref::<OutboundError>() {
                // What the server's metrics count as a call refused by the policy.
                if let Some(observer) = crate::telemetry::observer() {
                    observer.outbound_refused();
                }
                return Some(refused.to_string());
            }
            cause = err.source();
        }
        None
    }
}

/// Resolves names and keeps only the addresses the policy allows.
struct PolicyResolver {
    policy: Arc<OutboundPolicy>,
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = Arc::clone(&self.policy);
        let host = name.as_str().to_string();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if policy.allows_host(&host) {
                return Ok(Box::new(resolved.into_iter()) as reqwest::dns::Addrs);
            }
            let allowed: Vec<SocketAddr> = resolved
                .iter()
                .copied()
                .filter(|a| policy.allows(a.ip()))
                .collect();
            if allowed.is_empty() {
                let error = match resolved.first() {
                    Some(first) => OutboundError::Denied {
                        host,
                        address: canonical(first.ip()),
                    },
                    None => OutboundError::NoAllowedAddress(host),
                };
                return Err(Box::new(error) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// An IPv4 address mapped into IPv6 is the IPv4 address.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Whether an address belongs to the machine's own or a private network, or to no one.
fn is_internal(address: IpAddr) -> bool {
    match canonical(address) {
        IpAddr::V4(ip) => is_internal_v4(ip),
        IpAddr::V6(ip) => is_internal_v6(ip),
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254.0.0/16, the cloud metadata endpoints among them
        || ip.is_multicast()
        || ip.is_broadcast()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT, 100.64.0.0/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

fn is_internal_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local, fc00::/7 (AWS's fd00:ec2::254 among them)
        || (first & 0xffc0) == 0xfe80 // link-local, fe80::/10
        || (first & 0xffc0) == 0xfec0 // site-local (deprecated), fec0::/10
        || ip.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0] // NAT64 reaches IPv4 space
        || ip.to_ipv4().is_some_and(|v4| ip.segments()[..6] == [0; 6] && is_internal_v4(v4)) // IPv4-compatible
}

fn is_host_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.trim_end_matches('.').split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn cut(text: &str) -> String {
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    }

    #[test]
    fn internal_addresses_are_denied_by_default() {
        let policy = OutboundPolicy::default();
        for denied in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(!policy.allows(ip(denied)), "{denied} must be denied");
        }
        for allowed in ["1.1.1.1", "93.184.216.34", "2606:4700:4700::1111"] {
            assert!(policy.allows(ip(allowed)), "{allowed} must be allowed");
        }
    }

    #[test]
    fn an_operator_allows_loopback_ranges_and_hosts() {
        let policy =
            OutboundPolicy::parse("loopback, 10.20.0.0/16 models.internal").unwrap_or_default();
        assert!(policy.allows(ip("127.0.0.1")));
        assert!(policy.allows(ip("::1")));
        assert!(policy.allows(ip("10.20.3.4")));
        assert!(!policy.allows(ip("10.21.3.4")));
        assert!(!policy.allows(ip("169.254.169.254")));
        assert!(policy.allows_host("models.internal"));
        assert!(policy.allows_host("MODELS.internal."));
        assert!(!policy.allows_host("other.internal"));
        assert!(
            OutboundPolicy::parse("private")
                .unwrap_or_default()
                .allows(ip("192.168.0.1"))
        );
        assert_eq!(
            OutboundPolicy::parse("none").unwrap_or_else(|_| OutboundPolicy::allow_all()),
            OutboundPolicy::default()
        );
        assert!(matches!(
            OutboundPolicy::parse("not a/valid"),
            Err(OutboundError::InvalidEntry(_))
        ));
    }

    #[test]
    fn the_allow_list_comes_from_its_variable_or_is_the_default() {
        let unset = OutboundPolicy::from_env(&|_| None);
        assert_eq!(unset, Ok(OutboundPolicy::default()));
        let loopback = OutboundPolicy::from_env(&|name| {
            (name == ALLOW_VARIABLE).then(|| "loopback".to_string())
        })
        .unwrap_or_default();
        assert!(loopback.allows(ip("127.0.0.1")));
        assert!(!loopback.allows(ip("10.0.0.1")));
        assert!(matches!(
            OutboundPolicy::from_env(&|_| Some("not a/valid".into())),
            Err(OutboundError::InvalidEntry(_))
        ));
    }

    #[test]
    fn an_address_in_a_url_is_checked_before_sending() {
        let policy = OutboundPolicy::default();
        assert!(matches!(
            policy.check_url("http://169.254.169.254/latest/meta-data/"),
            Err(OutboundError::Denied { .. })
        ));
        assert!(matches!(
            policy.check_url("http://[::ffff:7f00:1]:8080/v1"),
            Err(OutboundError::Denied { .. })
        ));
        assert!(policy.check_url("https://api.openai.com/v1").is_ok());
        assert!(matches!(
            policy.check_url("file:///etc/passwd"),
            Err(OutboundError::InvalidUrl(_))
        ));
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused() {
        let policy = Arc::new(OutboundPolicy::default());
        let client = policy.client_builder().build();
        let Ok(client) = client else {
            panic!("the client builds");
        };
        let Err(err) = client.get("http://localhost:9/").send().await else {
            panic!("localhost must be refused");
        };
        let refusal = OutboundPolicy::refusal(&err);
        assert!(
            refusal
                .as_deref()
                .is_some_and(|r| r.contains("outbound policy")),
            "{refusal:?}"
        );
    }
}
