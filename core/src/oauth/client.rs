//! Clients: their metadata (RFC 7591 registration or a Client ID Metadata Document), and
//! the redirect URI rules.

use serde::{Deserialize, Serialize};
use url::{Host, Url};

use super::OAuthError;

/// The longest client name kept; longer ones are cut (it is shown on the consent page).
const MAX_NAME_CHARS: usize = 80;
const MAX_REDIRECT_URIS: usize = 10;
/// The largest metadata document read.
pub(super) const MAX_DOCUMENT_BYTES: usize = 16 * 1024;

/// The fields of client metadata the server uses; any others are kept as sent.
#[derive(Debug, Clone, Deserialize)]
pub struct Registration {
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub client_name: Option<String>,
    #[serde(default)]
    pub redirect_uris: Vec<String>,
    #[serde(default)]
    pub token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    pub grant_types: Option<Vec<String>>,
    #[serde(default)]
    pub response_types: Option<Vec<String>>,
}

/// A client as the flow sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClientInfo {
    pub client_id: String,
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub auth_method: String,
    /// `dynamic` or `metadata_document`.
    pub registration: String,
}

/// Checked metadata: name, redirect URIs and authentication method.
pub(super) struct CheckedMetadata {
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub auth_method: String,
}

/// Checks registration metadata. `public_only` for metadata documents, which cannot hold
/// a secret.
pub(super) fn check(
    metadata: &Registration,
    public_only: bool,
) -> Result<CheckedMetadata, OAuthError> {
    if metadata.redirect_uris.is_empty() {
        return Err(OAuthError::InvalidRedirectUri(
            "redirect_uris must name at least one redirect URI".into(),
        ));
    }
    if metadata.redirect_uris.len() > MAX_REDIRECT_URIS {
        return Err(OAuthError::InvalidRedirectUri(format!(
            "at most {MAX_REDIRECT_URIS} redirect URIs"
        )));
    }
    for uri in &metadata.redirect_uris {
        check_redirect_uri(uri)?;
    }
    let auth_method = metadata
        .token_endpoint_auth_method
        .clone()
        .unwrap_or_else(|| {
            if public_only {
                "none"
            } else {
                "client_secret_basic"
            }
            .into()
        });
    let allowed: &[&str] = if public_only {
        &["none"]
    } else {
        &["none", "client_secret_post", "client_secret_basic"]
    };
    if !allowed.contains(&auth_method.as_str()) {
        return Err(OAuthError::InvalidClientMetadata(format!(
            "token_endpoint_auth_method `{auth_method}` is not supported: use one of {}",
            allowed.join(", ")
        )));
    }
    if let Some(grants) = &metadata.grant_types
        && let Some(other) = grants
            .iter()
            .find(|g| !matches!(g.as_str(), "authorization_code" | "refresh_token"))
    {
        return Err(OAuthError::InvalidClientMetadata(format!(
            "grant type `{other}` is not supported: authorization_code and refresh_token are"
        )));
    }
    if let Some(types) = &metadata.response_types
        && types.iter().any(|t| t != "code")
    {
        return Err(OAuthError::InvalidClientMetadata(
            "only the `code` response type is supported".into(),
        ));
    }
    Ok(CheckedMetadata {
        name: display_name(metadata.client_name.as_deref(), &metadata.redirect_uris[0]),
        redirect_uris: metadata.redirect_uris.clone(),
        auth_method,
    })
}

/// The client's name for the consent page and the audit: control characters removed, cut
/// to [`MAX_NAME_CHARS`]; without one, the redirect URI's host.
fn display_name(name: Option<&str>, first_redirect: &str) -> String {
    let cleaned: String = name
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() {
        redirect_host(first_redirect)
    } else {
        cleaned.to_owned()
    }
}

/// The host a redirect URI sends the browser to, for the consent page (a private-use
/// scheme is shown as itself).
pub fn redirect_host(uri: &str) -> String {
    match Url::parse(uri) {
        Ok(url) => match url.host_str() {
            Some(host) => match url.port() {
                Some(port) if is_loopback(&url) => format!("{host}:{port}"),
                _ => host.to_owned(),
            },
            None => format!("{}:", url.scheme()),
        },
        Err(_) => uri.to_owned(),
    }
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// A redirect URI may be `https`, `http` on a loopback host (a native app's local
/// server), or a private-use scheme with a dot (`com.example.app:/cb`, RFC 8252 §7.1);
/// never with a fragment.
fn check_redirect_uri(uri: &str) -> Result<(), OAuthError> {
    let refuse = |why: &str| OAuthError::InvalidRedirectUri(format!("redirect URI `{uri}` {why}"));
    let url = Url::parse(uri).map_err(|_| refuse("is not an absolute URI"))?;
    if url.fragment().is_some() {
        return Err(refuse("must not have a fragment"));
    }
    match url.scheme() {
        "https" if url.has_host() => Ok(()),
        "http" if is_loopback(&url) => Ok(()),
        "http" => Err(refuse(
            "uses http on a host that is not loopback: use https",
        )),
        "javascript" | "data" | "file" | "vbscript" => Err(refuse("uses a forbidden scheme")),
        scheme if scheme.contains('.') => Ok(()),
        _ => Err(refuse(
            "must be https, http on a loopback address, or a private-use scheme such as com.example.app:",
        )),
    }
}

/// Whether `presented` is one of `registered`: exactly equal, or, for an `http` loopback
/// URI, equal but for the port (RFC 8252 §7.3: a native app picks its port at run time).
pub(super) fn redirect_matches(registered: &[String], presented: &str) -> bool {
    if registered.iter().any(|r| r == presented) {
        return true;
    }
    let Ok(presented) = Url::parse(presented) else {
        return false;
    };
    if presented.scheme() != "http" || !is_loopback(&presented) {
        return false;
    }
    registered.iter().any(|r| {
        let Ok(mut registered) = Url::parse(r) else {
            return false;
        };
        if registered.scheme() != "http" || !is_loopback(&registered) {
            return false;
        }
        let mut presented = presented.clone();
        // Both are loopback http URLs, which always accept a port.
        let _ = registered.set_port(None);
        let _ = presented.set_port(None);
        registered == presented
    })
}

/// Whether `client_id` names a metadata document rather than a registered client.
pub(super) fn is_document_url(client_id: &str) -> bool {
    client_id.starts_with("https://") || client_id.starts_with("http://")
}

/// Checks a metadata document URL (RFC draft "OAuth Client ID Metadata Document": https,
/// a path, no fragment, no credentials, no dot segments).
pub(super) fn check_document_url(client_id: &str, loopback_http: bool) -> Result<Url, OAuthError> {
    let refuse = |why: &str| OAuthError::InvalidClient(format!("client_id `{client_id}` {why}"));
    let url = Url::parse(client_id).map_err(|_| refuse("is not a URL"))?;
    let scheme_ok =
        url.scheme() == "https" || (loopback_http && url.scheme() == "http" && is_loopback(&url));
    if !scheme_ok {
        return Err(refuse("must be an https URL"));
    }
    if url.path() == "/" || url.path().is_empty() {
        return Err(refuse("must have a path"));
    }
    if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(refuse("must not carry a fragment or credentials"));
    }
    if client_id.contains("/./") || client_id.contains("/../") {
        return Err(refuse("must not have dot segments"));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uris(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_redirect_uri_matches_exactly_or_on_loopback_with_any_port() {
        let registered = uris(&["https://app.example.com/cb", "http://127.0.0.1/callback"]);
        assert!(redirect_matches(&registered, "https://app.example.com/cb"));
        assert!(redirect_matches(
            &registered,
            "http://127.0.0.1:49152/callback"
        ));
        for other in [
            "https://app.example.com/cb/",
            "https://app.example.com/cb?x=1",
            "https://app.example.com:8443/cb",
            "http://127.0.0.1:49152/other",
            "http://localhost:49152/callback",
            "https://evil.example.com/cb",
        ] {
            assert!(!redirect_matches(&registered, other), "{other}");
        }
    }

    #[test]
    fn redirect_uris_must_be_https_loopback_http_or_a_private_scheme() {
        for good in [
            "https://app.example.com/cb",
            "http://127.0.0.1:3000/callback",
            "http://localhost/cb",
            "http://[::1]:8080/cb",
            "com.example.app:/oauth",
        ] {
            assert!(check_redirect_uri(good).is_ok(), "{good}");
        }
        for bad in [
            "http://app.example.com/cb",
            "https://app.example.com/cb#frag",
            "javascript:alert(1)",
            "myapp:/cb",
            "/relative",
        ] {
            assert!(check_redirect_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_client_name_is_cleaned_and_falls_back_to_the_redirect_host() {
        assert_eq!(
            display_name(Some(" Claude\u{7}\n "), "https://a.b/c"),
            "Claude"
        );
        assert_eq!(
            display_name(None, "https://app.example.com/cb"),
            "app.example.com"
        );
        assert_eq!(
            display_name(Some(&"x".repeat(500)), "https://a.b/c").len(),
            MAX_NAME_CHARS
        );
    }

    #[test]
    fn a_metadata_document_url_is_https_with_a_path() {
        assert!(check_document_url("https://app.example.com/oauth/client.json", false).is_ok());
        assert!(check_document_url("https://app.example.com/", false).is_err());
        assert!(check_document_url("http://127.0.0.1:9/c.json", false).is_err());
        assert!(check_document_url("http://127.0.0.1:9/c.json", true).is_ok());
        assert!(check_document_url("http://example.com/c.json", true).is_err());
        assert!(check_document_url("https://u:p@app.example.com/c.json", false).is_err());
    }
}
