//! The egress inspector: URLs in a call's arguments that point at internal hosts.

use serde_json::{Map, Value};
use url::Url;

use super::net::{borrowed, forbidden_host, other_readings};
use super::{Finding, each_argument_string};
use crate::model::Inspector;

/// Schemes whose URLs name a host a tool could be made to fetch.
const SCHEMES: [&str; 5] = ["http", "https", "ftp", "gopher", "file"];

/// Every string in `arguments` holding an absolute http(s), ftp, gopher or file URL (or a
/// scheme-relative `//host/…`) whose host [`forbidden_host`] classifies, one finding per
/// string and reason, at the string's JSON Pointer.
pub fn egress_findings(arguments: &Map<String, Value>) -> Vec<Finding> {
    let mut findings: Vec<Finding> = Vec::new();
    each_argument_string(arguments, |path, text| {
        let parsed = urls_in(text).filter_map(|url| url.host().as_ref().and_then(forbidden_host));
        // What other parsers would read in an authority with several `@`.
        let others = text
            .split(|c: char| c.is_whitespace() || "\"'`<>(){},;|".contains(c))
            .flat_map(other_readings)
            .filter_map(|host| forbidden_host(&borrowed(&host)));
        for kind in parsed.chain(others) {
            if !findings.iter().any(|f| f.path == path && f.kind == kind) {
                findings.push(Finding {
                    inspector: Inspector::Egress,
                    kind,
                    path: path.to_owned(),
                    fingerprint: None,
                });
            }
        }
    });
    findings
}

/// The host names (not addresses) of the URLs in the strings of `arguments`, each with the
/// JSON Pointer of its string, once per string: what an operator may have resolved
/// ([`super::resolve`]). Names already internal as written are left out: the literal
/// reading found them.
pub fn names_in(arguments: &Map<String, Value>) -> Vec<(String, String)> {
    let mut names: Vec<(String, String)> = Vec::new();
    each_argument_string(arguments, |path, text| {
        for url in urls_in(text) {
            if let Some(url::Host::Domain(name)) = url.host()
                && forbidden_host(&url::Host::Domain(name)).is_none()
                && !names.iter().any(|(p, n)| p == path && n == name)
            {
                names.push((path.to_owned(), name.to_owned()));
            }
        }
    });
    names
}

/// The URLs in `text`: the whole string, or any word of it (split at whitespace, quotes and
/// brackets other than the `[]` of an IPv6 host), that parses as one of [`SCHEMES`] or
/// starts with `//`.
fn urls_in(text: &str) -> impl Iterator<Item = Url> + '_ {
    let whole = std::iter::once(text.trim());
    let words = text.split(|c: char| c.is_whitespace() || "\"'`<>(){},;|".contains(c));
    whole.chain(words).filter_map(|word| {
        let url = match word.strip_prefix("//") {
            Some(rest) if !rest.is_empty() => Url::parse(&format!("http://{rest}")).ok()?,
            Some(_) => return None,
            None if word.contains(':') => Url::parse(word).ok()?,
            None => return None,
        };
        SCHEMES.contains(&url.scheme()).then_some(url)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{egress_findings, names_in};

    #[test]
    fn the_names_to_resolve_are_the_hosts_of_urls_that_are_not_internal_as_written() {
        let serde_json::Value::Object(arguments) = json!({
            "url": "https://files.example.com/a",
            "mirrors": ["see http://files.example.com/b and //cdn.example.net/x", "plain text"],
            "internal": "http://127.0.0.1/ and http://10.0.0.5.nip.io/",
            "count": 3,
        }) else {
            unreachable!()
        };
        assert_eq!(
            names_in(&arguments),
            [
                ("/mirrors/0".to_owned(), "files.example.com".to_owned()),
                ("/mirrors/0".to_owned(), "cdn.example.net".to_owned()),
                ("/url".to_owned(), "files.example.com".to_owned()),
            ]
        );
    }

    fn found(arguments: serde_json::Value) -> Vec<(String, &'static str)> {
        let serde_json::Value::Object(arguments) = arguments else {
            panic!("the test's arguments are an object");
        };
        egress_findings(&arguments)
            .into_iter()
            .map(|f| (f.path, f.kind))
            .collect()
    }

    #[test]
    fn a_metadata_url_in_an_argument_is_found_at_its_pointer() {
        let arguments = json!({
            "url": "http://169.254.169.254/latest/meta-data/iam/",
            "options": {"fallbacks": ["https://example.com/", "http://10.0.0.5:8080/admin"]},
            "a/b~c": "//localhost/x",
        });
        let mut got = found(arguments);
        got.sort();
        assert_eq!(
            got,
            [
                ("/a~1b~0c".to_owned(), "loopback"),
                ("/options/fallbacks/1".to_owned(), "private"),
                ("/url".to_owned(), "metadata"),
            ]
        );
    }

    #[test]
    fn other_spellings_and_schemes_of_internal_hosts_are_found() {
        for url in [
            "http://2130706433/",
            "http://0x7f.1/",
            "http://[::ffff:127.0.0.1]/",
            "http://allowed.com@127.0.0.1/",
            "gopher://127.0.0.1:6379/_FLUSHALL",
            "ftp://192.168.0.1/",
            "file://127.0.0.1/etc/passwd",
            "HTTP://METADATA.GOOGLE.INTERNAL/computeMetadata/v1/",
            "please fetch http://[fd00:ec2::254]/latest now",
        ] {
            assert_eq!(found(json!({ "u": url })).len(), 1, "{url}");
        }
    }

    #[test]
    fn names_that_embed_an_internal_address_and_ambiguous_authorities_are_found() {
        for url in [
            "http://127.0.0.1.nip.io/admin",
            "http://169.254.169.254.nip.io/latest/meta-data/",
            "http://10-0-0-5.sslip.io/",
            "http://7f000001.nip.io/",
            "http://app.localtest.me/",
            "http://ip-10-0-0-5.ec2.internal/",
            "http://user@127.0.0.1:80@example.com/",
        ] {
            assert_eq!(found(json!({ "u": url })).len(), 1, "{url}");
        }
        for url in [
            "https://10-things-to-do.example.com/",
            "https://cdn1.example.net/v10.0.0.1/app.js",
            "https://8.8.8.8.nip.io/",
            "https://a1b2c3d4.preview.example.app/",
        ] {
            assert_eq!(found(json!({ "u": url })), [], "{url}");
        }
    }

    #[test]
    fn public_urls_and_text_that_only_mentions_hosts_are_not_findings() {
        let arguments = json!({
            "url": "https://api.example.com/v1?next=http%3A%2F%2F127.0.0.1",
            "note": "the server at 127.0.0.1 is down; see localhost docs",
            "path": "/var/lib/10.0.0.1/data",
            "time": "12:30",
            "file": "file:///etc/hosts",
            "ratio": 0.5,
        });
        assert_eq!(found(arguments), []);
    }
}
