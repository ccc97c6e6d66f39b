//! Upstreams: the downstream MCP servers whose tools the gateway executes.

use serde::{Deserialize, Serialize};

use crate::slug::Slug;

/// How the gateway reaches an upstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum UpstreamKind {
    /// A child process speaking MCP over stdin/stdout.
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
    },
    /// An MCP server reached over streamable HTTP.
    Http {
        url: String,
        /// PEM certificates trusted for this upstream in addition to the system's roots,
        /// for a server whose certificate an internal CA issued. Public, so part of the
        /// catalog (its credentials are not).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_bundle: Option<String>,
        /// Dial a plain `http://` URL on a host other than this machine. Off by default:
        /// anyone on the path can then read the calls and results and rewrite the tool
        /// definitions the agent is shown.
        #[serde(default, skip_serializing_if = "is_false")]
        allow_plaintext: bool,
    },
    /// An MCP server inside the skillgate process (the curation tools). Its tools are part
    /// of the binary: it is added to every loaded catalog and never stored.
    Builtin,
}

impl UpstreamKind {
    /// An HTTP upstream at `url` that trusts the system's roots only.
    pub fn http(url: impl Into<String>) -> Self {
        Self::Http {
            url: url.into(),
            ca_bundle: None,
            allow_plaintext: false,
        }
    }

    /// The short name stored in the `kind` column.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
            Self::Builtin => "builtin",
        }
    }
}

fn is_false(value: &bool) -> bool {
    !value
}

/// Why the gateway must not dial `url`: it is not an `http://` or `https://` URL, or it is
/// plain `http://` to a host other than this machine (`localhost`, 127.0.0.0/8, `::1`)
/// and `allow_plaintext` is off. The one check of an upstream URL, when it is saved (console,
/// `/api`, catalog file) and again when it is dialled.
pub fn check_upstream_url(url: &str, allow_plaintext: bool) -> Result<(), String> {
    let not_http = || format!("`{url}` is not an http:// or https:// URL");
    let parsed = url::Url::parse(url).map_err(|_| not_http())?;
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if allow_plaintext || parsed.host().is_some_and(|h| is_loopback(&h)) => Ok(()),
        "http" => Err(format!(
            "`{url}` is plain http:// to a remote host: anyone on the network path could read \
             the calls and rewrite the tools. Use https://, or set `allow_plaintext` on this \
             upstream to accept that risk"
        )),
        _ => Err(not_http()),
    }
}

fn is_loopback(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upstream {
    pub name: Slug,
    #[serde(flatten)]
    pub kind: UpstreamKind,
}

/// Who an upstream is, as the gateway saw it when it connected: the key of its TLS
/// certificate and the `serverInfo` of its MCP handshake. Pinned at the first sync like a
/// tool definition. Another key (a re-issued certificate, even from the same CA) or another
/// server name later quarantines the upstream until an admin admits it; another version
/// alone is an upgrade of the same party, recorded, audited and shown, but not refused
/// (routine releases would otherwise take every upstream offline until someone clicks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamIdentity {
    /// `sha256/<base64>` of the end-entity certificate's SubjectPublicKeyInfo (HPKP's
    /// spelling); `None` for stdio, plain `http://` and built-in upstreams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spki_sha256: Option<String>,
    /// `serverInfo.name` of the MCP `initialize` result.
    pub server_name: String,
    /// `serverInfo.version`: recorded with the pin; a change alone does not quarantine.
    pub server_version: String,
}

impl UpstreamIdentity {
    /// Whether `other` is the same party as `self`: the same certificate key and server
    /// name, whatever its version. What a quarantine compares.
    pub fn same_party(&self, other: &Self) -> bool {
        self.spki_sha256 == other.spki_sha256 && self.server_name == other.server_name
    }

    /// The fields in which `other` differs from `self`, by their names.
    pub fn differences(&self, other: &Self) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if self.spki_sha256 != other.spki_sha256 {
            fields.push("spki_sha256");
        }
        if self.server_name != other.server_name {
            fields.push("server_name");
        }
        if self.server_version != other.server_version {
            fields.push("server_version");
        }
        fields
    }

    /// The reason a call of a quarantined upstream's tool names: what changed, pinned and
    /// offered (public values: a key fingerprint, a name, a version).
    pub fn quarantine_reason(&self, offered: &Self) -> String {
        let changed: Vec<String> = self
            .differences(offered)
            .into_iter()
            .map(|field| {
                let (pinned, now) = match field {
                    "spki_sha256" => (
                        self.spki_sha256.as_deref().unwrap_or("none"),
                        offered.spki_sha256.as_deref().unwrap_or("none"),
                    ),
                    "server_name" => (self.server_name.as_str(), offered.server_name.as_str()),
                    _ => (
                        self.server_version.as_str(),
                        offered.server_version.as_str(),
                    ),
                };
                format!("{field} {pinned} -> {now}")
            })
            .collect();
        format!(
            "its identity differs from the pinned one ({})",
            changed.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_differs_in_each_field_and_the_reason_names_both_values() {
        let pinned = UpstreamIdentity {
            spki_sha256: Some("sha256/AAA=".into()),
            server_name: "demo".into(),
            server_version: "1.2.0".into(),
        };
        assert!(pinned.differences(&pinned.clone()).is_empty());
        let bumped = UpstreamIdentity {
            server_version: "1.2.1".into(),
            ..pinned.clone()
        };
        assert_eq!(pinned.differences(&bumped), ["server_version"]);
        assert!(pinned.same_party(&bumped), "an upgrade is the same party");
        let renamed = UpstreamIdentity {
            server_name: "other".into(),
            ..bumped.clone()
        };
        assert!(!pinned.same_party(&renamed));
        let rekeyed = UpstreamIdentity {
            spki_sha256: Some("sha256/BBB=".into()),
            ..pinned.clone()
        };
        assert_eq!(pinned.differences(&rekeyed), ["spki_sha256"]);
        assert!(!pinned.same_party(&rekeyed));
        assert_eq!(
            pinned.quarantine_reason(&rekeyed),
            "its identity differs from the pinned one (spki_sha256 sha256/AAA= -> sha256/BBB=)"
        );
    }

    #[test]
    fn plain_http_to_this_machine_is_accepted_in_every_loopback_spelling() {
        for url in [
            "http://127.0.0.1:8080/mcp",
            "http://127.3.2.1/mcp",
            "http://localhost:9/mcp",
            "http://LOCALHOST/mcp",
            "http://[::1]:9/mcp",
            "http://[::ffff:127.0.0.1]/mcp",
            "http://2130706433/mcp",
        ] {
            assert_eq!(check_upstream_url(url, false), Ok(()), "{url}");
        }
    }

    #[test]
    fn plain_http_to_a_remote_host_is_refused_naming_the_setting_unless_allowed() {
        for url in [
            "http://tools.example.com/mcp",
            "http://10.0.0.8/mcp",
            "http://localhost.evil.example/mcp",
            "HTTP://tools.example.com/mcp",
        ] {
            let refused = check_upstream_url(url, false).unwrap_err();
            assert!(refused.contains("allow_plaintext"), "{refused}");
            assert_eq!(check_upstream_url(url, true), Ok(()), "{url}");
        }
    }

    #[test]
    fn https_is_accepted_and_other_schemes_or_garbage_are_not_urls_of_an_upstream() {
        assert_eq!(
            check_upstream_url("https://tools.example.com/mcp", false),
            Ok(())
        );
        for url in [
            "ftp://tools.example/mcp",
            "tools.example.com",
            "http://",
            "",
        ] {
            let refused = check_upstream_url(url, true).unwrap_err();
            assert!(
                refused.contains("not an http:// or https:// URL"),
                "{refused}"
            );
        }
    }

    #[test]
    fn allow_plaintext_is_written_only_when_it_is_on() {
        let off = serde_json::to_value(UpstreamKind::http("http://127.0.0.1/mcp")).unwrap();
        assert!(off.get("allow_plaintext").is_none(), "{off}");
        let on = UpstreamKind::Http {
            url: "http://tools.example.com/mcp".into(),
            ca_bundle: None,
            allow_plaintext: true,
        };
        let json = serde_json::to_value(&on).unwrap();
        assert_eq!(json["allow_plaintext"], true);
        assert_eq!(serde_json::from_value::<UpstreamKind>(json).unwrap(), on);
    }
}
