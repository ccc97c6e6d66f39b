//! Network hosts a governed call may never reach, and the `url_host` argument check.

use std::net::{Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// Why a call may never reach `host` (`"loopback"`, `"private"`, `"link_local"`,
/// `"metadata"`, `"unspecified"`, `"multicast"`, `"reserved"`), or `None` for a public host.
///
/// A domain that is an IP address in another spelling (`2130706433`, `0x7f.1`, as an opaque
/// host of a non-special scheme keeps it) is read as that address first.
pub fn forbidden_host(host: &Host<&str>) -> Option<&'static str> {
    match host {
        Host::Domain(name) => match Host::parse(name) {
            Ok(Host::Ipv4(ip)) => forbidden_v4(ip),
            Ok(Host::Ipv6(ip)) => forbidden_v6(ip),
            Ok(Host::Domain(ascii)) => forbidden_domain(&ascii),
            // Not a host a resolver would accept either; its plain text is still checked.
            Err(_) => forbidden_domain(&name.to_ascii_lowercase()),
        },
        Host::Ipv4(ip) => forbidden_v4(*ip),
        Host::Ipv6(ip) => forbidden_v6(*ip),
    }
}

/// Public DNS services whose names resolve to the address written in them
/// (`10.0.0.5.nip.io`, `10-0-0-5.sslip.io`, `7f000001.nip.io`): DNS rebinding made easy.
const WILDCARD_DNS: [&str; 6] = [
    "nip.io",
    "sslip.io",
    "xip.io",
    "traefik.me",
    "local.gd",
    "backname.io",
];

/// Public names that always resolve to the loopback address.
const LOOPBACK_NAMES: [&str; 5] = [
    "localtest.me",
    "lvh.me",
    "vcap.me",
    "lacolhost.com",
    "localhost.direct",
];

/// Names that resolve to the machine itself or to a cloud's instance metadata service, or
/// that embed an internal address a resolver will hand back (`127.0.0.1.example.net`,
/// `ip-10-0-0-5.ec2.internal`, any name under a wildcard DNS service).
fn forbidden_domain(name: &str) -> Option<&'static str> {
    let name = name.trim_end_matches('.');
    if name == "localhost" || name.ends_with(".localhost") {
        return Some("loopback");
    }
    let under = |zone: &str| name == zone || name.ends_with(&format!(".{zone}"));
    if LOOPBACK_NAMES.iter().any(|zone| under(zone)) {
        return Some("loopback");
    }
    if let Some(ip) = v4_in_name(name, WILDCARD_DNS.iter().any(|zone| under(zone)))
        && let Some(reason) = forbidden_v4(ip)
    {
        return Some(reason);
    }
    const METADATA: [&str; 5] = [
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
    ];
    METADATA.contains(&name).then_some("metadata")
}

/// An IPv4 address written into a host name: four decimal labels in a row
/// (`10.0.0.5.nip.io`), or four dash-separated numbers inside one label
/// (`10-0-0-5.sslip.io`, `ip-10-0-0-5`); under a wildcard DNS service also a label of eight
/// hex digits (`7f000001.nip.io`).
fn v4_in_name(name: &str, wildcard: bool) -> Option<Ipv4Addr> {
    let labels: Vec<&str> = name.split('.').collect();
    if let Some(ip) = labels.windows(4).find_map(four_octets) {
        return Some(ip);
    }
    for label in &labels {
        let parts: Vec<&str> = label.split('-').collect();
        if let Some(ip) = parts.windows(4).find_map(four_octets) {
            return Some(ip);
        }
        if wildcard && label.len() == 8 && label.bytes().all(|b| b.is_ascii_hexdigit()) {
            return u32::from_str_radix(label, 16).ok().map(Ipv4Addr::from);
        }
    }
    None
}

/// Four decimal parts of at most three digits, each 0..=255, as an address.
fn four_octets(parts: &[&str]) -> Option<Ipv4Addr> {
    let octet = |part: &str| -> Option<u8> {
        (!part.is_empty() && part.len() <= 3 && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse().ok())
            .flatten()
    };
    match parts {
        [a, b, c, d] => Some(Ipv4Addr::new(octet(a)?, octet(b)?, octet(c)?, octet(d)?)),
        _ => None,
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    // Metadata addresses first: they sit inside the link-local and CGNAT ranges.
    if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) {
        Some("metadata")
    } else if a == 0 {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_link_local() {
        Some("link_local")
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        Some("private")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if a >= 240 {
        Some("reserved")
    } else {
        None
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let segments = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
        return Some("metadata");
    }
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    if let Some(v4) = embedded_v4(ip) {
        return forbidden_v4(v4);
    }
    match segments[0] {
        s if s & 0xfe00 == 0xfc00 => Some("private"),
        s if s & 0xffc0 == 0xfe80 => Some("link_local"),
        // Site-local (deprecated, fec0::/10): private in practice.
        s if s & 0xffc0 == 0xfec0 => Some("private"),
        s if s & 0xff00 == 0xff00 => Some("multicast"),
        _ => None,
    }
}

/// The IPv4 address an IPv6 address carries: mapped (`::ffff:a.b.c.d`), compatible
/// (`::a.b.c.d`), translated (`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::/96`) or 6to4
/// (`2002:AABB:CCDD::/48`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = || Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _]
        | [0, 0, 0, 0, 0, 0, _, _]
        | [0, 0, 0, 0, 0xffff, 0, _, _]
        | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low()),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))),
        _ => None,
    }
}

/// The hosts other URL parsers may read in `url` where the WHATWG parser reads the one
/// after the last `@`: in `http://a@127.0.0.1:80@example.com/` some clients connect to
/// `127.0.0.1`. Empty for an authority with at most one `@`.
pub fn other_readings(url: &str) -> Vec<Host<String>> {
    let Some((_, rest)) = url.split_once("//") else {
        return Vec::new();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let parts: Vec<&str> = authority.split('@').collect();
    if parts.len() < 3 {
        return Vec::new();
    }
    parts[1..parts.len() - 1]
        .iter()
        .filter_map(|part| {
            let host = match part.rsplit_once(':') {
                Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
                _ => part,
            };
            Host::parse(host).ok()
        })
        .collect()
}

/// One entry of a `url_host` list: a host, with `*.` every subdomain of it, or `*` any
/// public host (internal ones are refused before any entry is read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEntry {
    /// `None` for `*`.
    host: Option<Host<String>>,
    subdomains: bool,
}

impl HostEntry {
    /// Reads an entry as an operator writes it (`api.example.com`, `*.example.com`,
    /// `203.0.113.7`, `[2001:db8::1]`), or says why it is not one.
    pub fn parse(entry: &str) -> Result<Self, String> {
        if entry == "*" {
            return Ok(Self {
                host: None,
                subdomains: true,
            });
        }
        let (subdomains, rest) = match entry.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, entry),
        };
        let stray = |c: char| c.is_whitespace() || c.is_control() || "/\\:@?#%*".contains(c);
        if rest.is_empty() || (!rest.starts_with('[') && rest.chars().any(stray)) {
            return Err(format!("`{entry}` is not a host name"));
        }
        let host = Host::parse(rest).map_err(|e| format!("`{entry}` is not a host name: {e}"))?;
        if subdomains && !matches!(host, Host::Domain(_)) {
            return Err(format!("`{entry}`: only a domain can have `*.`"));
        }
        if let Host::Domain(name) = &host
            && !name.contains('.')
            && name != "localhost"
        {
            return Err(format!("`{entry}` is not a fully qualified domain"));
        }
        if let Some(reason) = forbidden_host(&borrowed(&host)) {
            return Err(format!(
                "`{entry}` is a {} address, which no call may reach",
                reason.replace('_', "-")
            ));
        }
        Ok(Self {
            host: Some(host),
            subdomains,
        })
    }

    fn matches(&self, host: &Host<&str>) -> bool {
        let Some(entry) = &self.host else {
            return true;
        };
        match (entry, host) {
            (Host::Domain(entry), Host::Domain(name)) => {
                let name = name.trim_end_matches('.');
                if self.subdomains {
                    name.len() > entry.len()
                        && name.ends_with(entry.as_str())
                        && name[..name.len() - entry.len()].ends_with('.')
                } else {
                    name == entry
                }
            }
            (Host::Ipv4(entry), Host::Ipv4(ip)) => entry == ip,
            (Host::Ipv6(entry), Host::Ipv6(ip)) => entry == ip,
            _ => false,
        }
    }
}

pub fn borrowed(host: &Host<String>) -> Host<&str> {
    match host {
        Host::Domain(name) => Host::Domain(name),
        Host::Ipv4(ip) => Host::Ipv4(*ip),
        Host::Ipv6(ip) => Host::Ipv6(*ip),
    }
}

/// Whether `text` is an http(s) URL whose host is one of `hosts` and reachable; the error
/// says briefly why not, without quoting the argument.
pub fn url_host_check(text: &str, hosts: &[String]) -> Result<(), String> {
    // URL parsers disagree on backslashes, spaces and control characters (which host
    // `http://a.com\@b.com` names depends on who reads it): such a URL is refused.
    if text
        .chars()
        .any(|c| c == '\\' || c.is_whitespace() || c.is_control())
    {
        return Err("contains a backslash, space or control character".to_owned());
    }
    if !other_readings(text).is_empty() {
        return Err(
            "has more than one `@` before its host, which URL parsers read differently".to_owned(),
        );
    }
    let url = Url::parse(text).map_err(|e| format!("is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("is a `{}` URL, not http or https", url.scheme()));
    }
    let host = url.host().ok_or_else(|| "has no host".to_owned())?;
    if let Some(reason) = forbidden_host(&host) {
        return Err(format!(
            "names a {} host, which no call may reach",
            reason.replace('_', "-")
        ));
    }
    // Entries were checked when the catalog was saved; one that no longer parses matches nothing.
    let allowed = hosts
        .iter()
        .filter_map(|entry| HostEntry::parse(entry).ok())
        .any(|entry| entry.matches(&host));
    if allowed {
        Ok(())
    } else {
        let shown: String = host.to_string().chars().take(80).collect();
        Err(format!("names the host `{shown}`, which is not allowed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(url: &str) -> Option<&'static str> {
        let url = Url::parse(url).unwrap();
        forbidden_host(&url.host().unwrap())
    }

    fn hosts(entries: &[&str]) -> Vec<String> {
        entries.iter().map(|e| (*e).to_owned()).collect()
    }

    #[test]
    fn loopback_private_link_local_and_metadata_hosts_are_named() {
        let cases = [
            ("http://127.0.0.1/", "loopback"),
            ("http://localhost:8080/", "loopback"),
            ("http://api.localhost/", "loopback"),
            ("http://[::1]/", "loopback"),
            ("http://0.0.0.0/", "unspecified"),
            ("http://[::]/", "unspecified"),
            ("http://10.1.2.3/", "private"),
            ("http://172.16.0.1/", "private"),
            ("http://192.168.1.1/", "private"),
            ("http://100.64.0.1/", "private"),
            ("http://[fd12::1]/", "private"),
            ("http://169.254.1.1/", "link_local"),
            ("http://[fe80::1]/", "link_local"),
            ("http://169.254.169.254/latest/meta-data/", "metadata"),
            ("http://[fd00:ec2::254]/", "metadata"),
            ("http://metadata.google.internal/", "metadata"),
            ("http://metadata.google.internal./", "metadata"),
            ("http://100.100.100.200/", "metadata"),
        ];
        for (url, expected) in cases {
            assert_eq!(reason(url), Some(expected), "{url}");
        }
    }

    #[test]
    fn other_spellings_of_an_internal_address_are_still_internal() {
        let cases = [
            ("http://2130706433/", "loopback"),
            ("http://0x7f.1/", "loopback"),
            ("http://0177.0.0.1/", "loopback"),
            ("http://[::ffff:127.0.0.1]/", "loopback"),
            ("http://[::ffff:a9fe:a9fe]/", "metadata"),
            ("http://[::10.0.0.1]/", "private"),
            ("http://[64:ff9b::192.168.0.1]/", "private"),
            ("http://[2002:7f00:1::]/", "loopback"),
            ("http://LOCALHOST/", "loopback"),
            ("http://%6c%6fcalhost/", "loopback"),
            ("gopher://0x7f.1:70/", "loopback"),
            ("http://0251.0376.0251.0376/", "metadata"),
        ];
        for (url, expected) in cases {
            assert_eq!(reason(url), Some(expected), "{url}");
        }
    }

    #[test]
    fn public_hosts_that_look_internal_are_not_forbidden() {
        for url in [
            "https://example.com/",
            "https://localhost.example.com/",
            "https://metadata.example.com/",
            "http://8.8.8.8/",
            "http://172.32.0.1/",
            "http://100.128.0.1/",
            "http://[2001:db8::1]/",
            "http://[2606:4700::1111]/",
        ] {
            assert_eq!(reason(url), None, "{url}");
        }
    }

    #[test]
    fn a_url_on_a_listed_host_or_subdomain_passes() {
        let allowed = hosts(&["api.example.com", "*.cdn.example.net", "203.0.113.7"]);
        for url in [
            "https://api.example.com/v1/items?q=1",
            "https://API.Example.com./v1",
            "http://img.cdn.example.net/a.png",
            "https://a.b.cdn.example.net/",
            "http://203.0.113.7:8080/",
            "https://user:pass@api.example.com/",
        ] {
            assert_eq!(url_host_check(url, &allowed), Ok(()), "{url}");
        }
    }

    #[test]
    fn a_url_elsewhere_or_with_a_userinfo_trick_is_refused() {
        let allowed = hosts(&["api.example.com", "*.cdn.example.net"]);
        for url in [
            "https://evil.com/",
            "https://api.example.com@evil.com/",
            "https://api.example.com.evil.com/",
            "https://cdn.example.net/",
            "https://evilcdn.example.net/",
            "ftp://api.example.com/",
            "api.example.com/path",
            "https://evil.com\\@api.example.com/",
            " https://api.example.com/",
        ] {
            assert!(url_host_check(url, &allowed).is_err(), "{url}");
        }
    }

    #[test]
    fn an_internal_host_is_refused_even_when_its_name_is_listed() {
        let listed = hosts(&["*.example.com"]);
        let error = url_host_check("http://localhost.example.com/", &listed);
        assert_eq!(error, Ok(()), "a public subdomain named localhost is fine");
        let error = url_host_check("http://2130706433/", &hosts(&["127.0.0.1"])).unwrap_err();
        assert!(error.contains("loopback"), "{error}");
    }

    #[test]
    fn host_entries_are_checked_when_written() {
        for good in [
            "example.com",
            "*.example.com",
            "203.0.113.7",
            "[2001:db8::1]",
        ] {
            assert!(HostEntry::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "*.",
            "https://example.com",
            "example.com/path",
            "example.com:443",
            "*.203.0.113.7",
            "exa mple.com",
            "intranet",
            "localhost",
            "169.254.169.254",
            "a.*.example.com",
        ] {
            assert!(HostEntry::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_star_entry_allows_any_public_host_and_still_no_internal_one() {
        let any = hosts(&["*"]);
        assert_eq!(url_host_check("https://docs.python.org/3/", &any), Ok(()));
        assert_eq!(url_host_check("http://93.184.216.34/", &any), Ok(()));
        for internal in [
            "http://169.254.169.254/latest/meta-data/",
            "http://127.0.0.1.nip.io/",
            "http://user@127.0.0.1:80@example.com/",
        ] {
            assert!(url_host_check(internal, &any).is_err(), "{internal}");
        }
    }
}
