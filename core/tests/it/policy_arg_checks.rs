//! The string argument checks (`no_shell`, `path_under`, `url_host`): validated when the
//! catalog is saved, rendered for agents, and enforced by `decide`, failing closed.

use crate::policy_common;

use policy_common::*;
use serde_json::json;
use skillgate_core::model::{ArgCheck, Catalog, CatalogDraft, CatalogError, Limit, Scope};
use skillgate_core::policy::{CompiledCatalog, DenyCode};

fn check(arg: &str, check: ArgCheck) -> Limit {
    Limit::ArgBound {
        tool: "fetch".into(),
        arg: arg.into(),
        check,
    }
}

fn no_shell() -> Limit {
    check("name", ArgCheck::NoShell)
}

fn path_under() -> Limit {
    check(
        "path",
        ArgCheck::PathUnder {
            root: "/srv/files".into(),
        },
    )
}

fn url_host() -> Limit {
    check(
        "url",
        ArgCheck::UrlHost {
            hosts: vec!["api.example.com".into(), "*.cdn.example.net".into()],
        },
    )
}

/// One tool, `fetch(name, path, url, count)`, granted by the role `fetcher` with `limits`.
fn fetch_catalog(limits: Vec<Limit>) -> Catalog {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "path": {"type": "string"},
            "url": {"type": "string"},
            "count": {"type": "integer"}
        }
    });
    CatalogDraft {
        tools: vec![tool("fetch", schema)],
        skills: vec![skill("fetching", &["fetch"])],
        roles: vec![role("fetcher", &["fetching"], limits)],
        scopes: vec![Scope {
            slug: slug("front"),
            description: String::new(),
            roles: vec![slug("fetcher")],
            guardrails: Vec::new(),
        }],
    }
    .into_catalog(vec![upstream()])
}

fn validated(limit: Limit) -> Result<(), CatalogError> {
    let catalog = fetch_catalog(Vec::new());
    let mut role = catalog.role("fetcher").unwrap().clone();
    role.limits = vec![limit];
    catalog.validate_role(&role)
}

fn compiled_with(limit: Limit) -> CompiledCatalog {
    let catalog = fetch_catalog(vec![limit]);
    assert_eq!(catalog.validate(), Ok(()));
    CompiledCatalog::compile(catalog)
}

#[test]
fn a_role_with_no_shell_denies_shell_syntax_and_allows_a_plain_name() {
    let catalog = compiled_with(no_shell());
    let session = session("front", &["fetcher"]);
    for good in [
        r#"{"name": "O'Brien"}"#,
        r#"{"name": "a-b_c.txt"}"#,
        r#"{"name": "50%"}"#,
    ] {
        permit(&call(&catalog, &session, "fetch", good));
    }
    for (bad, why) in [
        (
            r#"{"name": "a.txt; rm -rf /"}"#,
            "contains a shell metacharacter `;`",
        ),
        (
            r#"{"name": "$(curl evil)"}"#,
            "contains a shell metacharacter `$`",
        ),
        (r#"{"name": "a\nb"}"#, "contains a line break"),
        (r#"{"name": "a.txt；id"}"#, "`;` (written as `；`)"),
    ] {
        let decision = call(&catalog, &session, "fetch", bad);
        assert_eq!(
            decision.deny_code(),
            Some(DenyCode::GovernanceViolation),
            "{bad}"
        );
        let rule = &denial(&decision).rule;
        assert!(
            rule.starts_with("Each call to `fetch` must have `name` free of shell syntax"),
            "{rule}"
        );
        assert!(rule.contains(why), "{bad}: {rule}");
    }
}

#[test]
fn a_role_with_path_under_denies_an_escape_and_allows_a_path_inside() {
    let catalog = compiled_with(path_under());
    let session = session("front", &["fetcher"]);
    permit(&call(
        &catalog,
        &session,
        "fetch",
        r#"{"path": "/srv/files/reports/q3.pdf"}"#,
    ));
    permit(&call(
        &catalog,
        &session,
        "fetch",
        r#"{"path": "/srv/files/a/../b.txt"}"#,
    ));
    for (bad, why) in [
        (
            r#"{"path": "/srv/files/../../etc/passwd"}"#,
            "resolves outside `/srv/files`",
        ),
        (
            r#"{"path": "/srv/files/%2e%2e/secret"}"#,
            "resolves outside `/srv/files`",
        ),
        (
            r#"{"path": "/etc/shadow"}"#,
            "resolves outside `/srv/files`",
        ),
        (r#"{"path": "~/.ssh/id_rsa"}"#, "starts with `~`"),
        (
            r#"{"path": "/srv/files/a\u0000b"}"#,
            "contains a NUL character",
        ),
    ] {
        let decision = call(&catalog, &session, "fetch", bad);
        assert_eq!(
            decision.deny_code(),
            Some(DenyCode::GovernanceViolation),
            "{bad}"
        );
        let rule = &denial(&decision).rule;
        assert!(rule.contains("symbolic links are not followed"), "{rule}");
        assert!(
            rule.contains(&format!("This call's `path` {why}.")),
            "{bad}: {rule}"
        );
    }
}

#[test]
fn a_role_with_url_host_denies_other_and_internal_hosts_and_allows_a_listed_one() {
    let catalog = compiled_with(url_host());
    let session = session("front", &["fetcher"]);
    permit(&call(
        &catalog,
        &session,
        "fetch",
        r#"{"url": "https://api.example.com/v1/items"}"#,
    ));
    permit(&call(
        &catalog,
        &session,
        "fetch",
        r#"{"url": "https://img.cdn.example.net/a.png"}"#,
    ));
    for (bad, why) in [
        (
            r#"{"url": "https://evil.com/"}"#,
            "names the host `evil.com`, which is not allowed",
        ),
        (
            r#"{"url": "https://api.example.com@evil.com/"}"#,
            "`evil.com`",
        ),
        (r#"{"url": "http://2130706433/"}"#, "loopback"),
        (r#"{"url": "http://[::ffff:127.0.0.1]/"}"#, "loopback"),
        (r#"{"url": "http://169.254.169.254/latest/"}"#, "metadata"),
        (r#"{"url": "file:///etc/passwd"}"#, "not http or https"),
    ] {
        let decision = call(&catalog, &session, "fetch", bad);
        assert_eq!(
            decision.deny_code(),
            Some(DenyCode::GovernanceViolation),
            "{bad}"
        );
        let rule = &denial(&decision).rule;
        assert!(rule.contains(why), "{bad}: {rule}");
    }
}

#[test]
fn a_missing_or_non_string_argument_fails_closed() {
    let session = session("front", &["fetcher"]);
    for (limit, arg) in [
        (no_shell(), "name"),
        (path_under(), "path"),
        (url_host(), "url"),
    ] {
        let catalog = compiled_with(limit);
        let missing = call(&catalog, &session, "fetch", "{}");
        assert_eq!(
            missing.deny_code(),
            Some(DenyCode::GovernanceViolation),
            "{arg}"
        );
        assert!(
            denial(&missing)
                .rule
                .contains(&format!("`{arg}` is missing")),
            "{arg}"
        );
        // The schema types the argument a string; a schema that did not would let a number
        // reach the limit, which refuses it too.
        let loose = CompiledCatalog::compile({
            let mut catalog = fetch_catalog(vec![check(arg, ArgCheck::NoShell)]);
            catalog.tools[0].spec.input_schema = json!({"type": "object"});
            catalog
        });
        let number = call(&loose, &session, "fetch", &format!(r#"{{"{arg}": 7}}"#));
        assert_eq!(
            number.deny_code(),
            Some(DenyCode::GovernanceViolation),
            "{arg}"
        );
        assert!(denial(&number).rule.contains("is not a string"), "{arg}");
    }
}

#[test]
fn a_huge_argument_is_not_echoed_in_the_denial() {
    let catalog = compiled_with(url_host());
    let session = session("front", &["fetcher"]);
    let host = format!("{}.evil.com", "a".repeat(60));
    let text = format!(r#"{{"url": "https://{host}/{}"}}"#, "x".repeat(10_000));
    let rule = denial(&call(&catalog, &session, "fetch", &text))
        .rule
        .clone();
    assert!(rule.len() < 500, "{rule}");
}

#[test]
fn string_checks_that_cannot_work_are_refused_when_saved() {
    let cases = [
        (
            check("count", ArgCheck::NoShell),
            CatalogError::NotString {
                tool: "fetch".into(),
                arg: "count".into(),
            },
        ),
        (
            check(
                "path",
                ArgCheck::PathUnder {
                    root: "srv/files".into(),
                },
            ),
            CatalogError::InvalidArgCheck {
                tool: "fetch".into(),
                arg: "path".into(),
                reason: "the root `srv/files` is not an absolute path".into(),
            },
        ),
        (
            check("url", ArgCheck::UrlHost { hosts: vec![] }),
            CatalogError::EmptyLimit {
                tool: "fetch".into(),
                what: "no allowed hosts",
            },
        ),
        (
            check(
                "url",
                ArgCheck::UrlHost {
                    hosts: vec!["https://api.example.com/".into()],
                },
            ),
            CatalogError::InvalidArgCheck {
                tool: "fetch".into(),
                arg: "url".into(),
                reason: "`https://api.example.com/` is not a host name".into(),
            },
        ),
        (
            check(
                "url",
                ArgCheck::UrlHost {
                    hosts: vec!["169.254.169.254".into()],
                },
            ),
            CatalogError::InvalidArgCheck {
                tool: "fetch".into(),
                arg: "url".into(),
                reason: "`169.254.169.254` is a metadata address, which no call may reach".into(),
            },
        ),
    ];
    for (limit, expected) in cases {
        assert_eq!(validated(limit.clone()), Err(expected), "{limit}");
    }
    for limit in [no_shell(), path_under(), url_host()] {
        assert_eq!(validated(limit.clone()), Ok(()), "{limit}");
    }
}

#[test]
fn string_checks_read_as_one_sentence_and_store_as_tagged_json() {
    assert_eq!(
        url_host().sentence(),
        "Each call to `fetch` must have `url` an http or https URL on `api.example.com` or any subdomain of `cdn.example.net`, never a loopback, private, link-local or cloud metadata address."
    );
    assert_eq!(
        url_host().to_string(),
        "host(fetch.url) in [api.example.com, *.cdn.example.net]"
    );
    assert_eq!(path_under().to_string(), "fetch.path under /srv/files");
    assert_eq!(no_shell().to_string(), "no_shell(fetch.name)");
    let stored = [
        (
            no_shell(),
            json!({"kind": "arg_bound", "tool": "fetch", "arg": "name", "check": "no_shell"}),
        ),
        (
            path_under(),
            json!({"kind": "arg_bound", "tool": "fetch", "arg": "path", "check": "path_under", "root": "/srv/files"}),
        ),
        (
            url_host(),
            json!({"kind": "arg_bound", "tool": "fetch", "arg": "url", "check": "url_host", "hosts": ["api.example.com", "*.cdn.example.net"]}),
        ),
    ];
    for (limit, expected) in stored {
        assert_eq!(serde_json::to_value(&limit).unwrap(), expected);
        assert_eq!(serde_json::from_value::<Limit>(expected).unwrap(), limit);
    }
}
