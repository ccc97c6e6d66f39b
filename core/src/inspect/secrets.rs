//! Credential detectors: vendor key formats by their fixed prefixes, PEM private keys, JWTs,
//! and high-entropy values assigned to a credential-named key (`password=`, `"token": …`),
//! in the text and inside base64 runs that wrap it (a credential file or an `.env` sent
//! encoded): such a run is reported whole, so redaction removes all of it.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::Regex;

use super::normalize::{MAX_UNWRAP_DEPTH, wrapped};

/// A secret found in one string: its detector and its byte span.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub kind: &'static str,
    pub start: usize,
    pub end: usize,
}

/// Values of a credential-named key shorter than this are not judged (too little to measure).
const MIN_VALUE_LEN: usize = 12;
/// Shannon entropy (bits per character) a credential-named key's value must reach: random
/// tokens of 12+ characters measure 3.4 and more, words and sentences stay below.
const MIN_ENTROPY: f64 = 3.3;

pub struct SecretDetector {
    /// Cheap gate: a string with none of these literals holds no secret we detect.
    anchors: AhoCorasick,
    patterns: Vec<(&'static str, Regex)>,
    assignment: Regex,
    aws_secret: Regex,
    credential_key: Regex,
}

static ANCHORS: &[&str] = &[
    "akia",
    "asia",
    "-----begin",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xox",
    "sk_live_",
    "rk_live_",
    "aiza",
    "sk-",
    "eyj",
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "credential",
    "auth",
];

impl SecretDetector {
    pub fn new() -> Self {
        let pattern = |kind, re: &str| (kind, Regex::new(re).expect("secret pattern compiles"));
        Self {
            anchors: AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::LeftmostFirst)
                .build(ANCHORS)
                .expect("anchors compile"),
            patterns: vec![
                pattern(
                    "private_key",
                    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)",
                ),
                pattern("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
                pattern(
                    "github_token",
                    r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
                ),
                pattern("slack_token", r"\bxox[abposr]-[0-9A-Za-z][0-9A-Za-z-]{9,}"),
                pattern("stripe_key", r"\b[sr]k_live_[0-9A-Za-z]{16,}\b"),
                pattern("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}"),
                pattern("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
                pattern("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
                pattern(
                    "jwt",
                    r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
                ),
            ],
            assignment: Regex::new(
                r#"(?i)\b((?:[a-z0-9]+[_-])*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|auth|credentials?))["']?\s*[:=]\s*["']?([^\s"'`,;&<>(){}\[\]]+)"#,
            )
            .expect("assignment pattern compiles"),
            aws_secret: Regex::new(r"(?:^|[^A-Za-z0-9/+=])([A-Za-z0-9/+]{40})(?:$|[^A-Za-z0-9/+=])")
                .expect("aws secret pattern compiles"),
            credential_key: Regex::new(
                r"(?i)^(?:[a-z0-9]+[_-])*(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|client[_-]?secret|credentials?)$",
            )
            .expect("credential key pattern compiles"),
        }
    }

    /// Secrets in `text`, in order, not overlapping. `key` is the JSON key the string is the
    /// value of, when it is one: a credential-named key makes the whole value a candidate.
    pub fn scan(&self, text: &str, key: Option<&str>) -> Vec<Hit> {
        let mut hits = Vec::new();
        if self.anchors.is_match(text) {
            self.scan_patterns(text, &mut hits);
        }
        self.scan_wrapped(text, 0, &mut hits);
        if hits.is_empty()
            && key.is_some_and(|key| self.is_credential_key(key))
            && is_random_secret(text)
        {
            hits.push(Hit {
                kind: "high_entropy_secret",
                start: 0,
                end: text.len(),
            });
        }
        hits
    }

    fn scan_patterns(&self, text: &str, hits: &mut Vec<Hit>) {
        for (kind, re) in &self.patterns {
            for m in re.find_iter(text) {
                if *kind == "openai_key" && !is_random_secret(&m.as_str()[3..]) {
                    continue;
                }
                push(hits, kind, m.start(), m.end());
            }
        }
        if hits.iter().any(|h| h.kind == "aws_access_key")
            || text.to_ascii_lowercase().contains("aws_secret")
        {
            for caps in self.aws_secret.captures_iter(text) {
                let m = caps.get(1).expect("group 1");
                if is_random_secret(m.as_str()) {
                    push(hits, "aws_secret_key", m.start(), m.end());
                }
            }
        }
        for caps in self.assignment.captures_iter(text) {
            let (key, value) = (&caps[1], caps.get(2).expect("group 2"));
            if !names_a_non_secret(key) && is_random_secret(value.as_str()) {
                push(hits, "high_entropy_secret", value.start(), value.end());
            }
        }
        hits.sort_by_key(|h| h.start);
    }

    /// Adds each base64 run of `text` that wraps a secret, whole, as the kind found inside
    /// (the first one); runs already inside a hit are not decoded again.
    fn scan_wrapped(&self, text: &str, depth: u8, hits: &mut Vec<Hit>) {
        if depth >= MAX_UNWRAP_DEPTH {
            return;
        }
        let mut found = Vec::new();
        for (span, decoded) in wrapped(text) {
            if hits
                .iter()
                .any(|h| span.start < h.end && h.start < span.end)
            {
                continue;
            }
            let mut inner = Vec::new();
            if self.anchors.is_match(&decoded) {
                self.scan_patterns(&decoded, &mut inner);
            }
            self.scan_wrapped(&decoded, depth + 1, &mut inner);
            if let Some(first) = inner.first() {
                found.push((first.kind, span));
            }
        }
        for (kind, span) in found {
            push(hits, kind, span.start, span.end);
        }
        hits.sort_by_key(|h| h.start);
    }

    fn is_credential_key(&self, key: &str) -> bool {
        !names_a_non_secret(key) && self.credential_key.is_match(key)
    }
}

/// Paging cursors, token counts and the like are named like credentials and are not.
fn names_a_non_secret(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    [
        "page", "cursor", "next", "count", "type", "limit", "usage", "expires", "name", "id",
    ]
    .iter()
    .any(|w| lower.split(['_', '-']).any(|part| part == *w))
}

/// Adds a hit unless it overlaps one already found (a more specific detector ran first).
fn push(hits: &mut Vec<Hit>, kind: &'static str, start: usize, end: usize) {
    if hits.iter().any(|h| start < h.end && h.start < end) {
        return;
    }
    hits.push(Hit { kind, start, end });
}

/// Whether `value` looks like a generated credential rather than a word, an id or a digest:
/// long enough, of mixed character classes, with high Shannon entropy, and neither a UUID,
/// a hex digest, a number, a placeholder nor a URL.
pub fn is_random_secret(value: &str) -> bool {
    let len = value.chars().count();
    if !(MIN_VALUE_LEN..=512).contains(&len) || value.contains(' ') {
        return false;
    }
    let hex = value.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    // Placeholders (`${VAR}`, `<your-key>`) and what redaction left (`[REDACTED:…]`).
    let placeholder = value.starts_with(['$', '<', '[', '{', '%']);
    if hex || placeholder || value.contains("://") {
        return false;
    }
    let lower = value.chars().any(|c| c.is_ascii_lowercase());
    let upper = value.chars().any(|c| c.is_ascii_uppercase());
    let digit = value.chars().any(|c| c.is_ascii_digit());
    if u8::from(lower) + u8::from(upper) + u8::from(digit) < 2 || !digit && len < 20 {
        return false;
    }
    // Dotted or dashed words (`reset-password-link`, `config.yaml`) are not random.
    if value
        .split(['-', '_', '.', '/'])
        .all(|part| part.chars().all(|c| c.is_ascii_alphabetic()))
    {
        return false;
    }
    shannon_entropy(value) >= MIN_ENTROPY
}

/// Bits per character of `text`'s character distribution.
pub fn shannon_entropy(text: &str) -> f64 {
    let mut counts = [0u32; 256];
    let mut total = 0u32;
    for b in text.bytes() {
        counts[usize::from(b)] += 1;
        total += 1;
    }
    if total == 0 {
        return 0.0;
    }
    let total = f64::from(total);
    counts
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| {
            let p = f64::from(n) / total;
            -p * p.log2()
        })
        .sum()
}

pub static DETECTOR: LazyLock<SecretDetector> = LazyLock::new(SecretDetector::new);

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<&'static str> {
        DETECTOR
            .scan(text, None)
            .into_iter()
            .map(|h| h.kind)
            .collect()
    }

    #[test]
    fn an_aws_access_key_and_the_secret_key_beside_it_are_found() {
        let text = "aws_access_key_id = AKIAQ3EGUWB6CMRXNL2T\naws_secret_access_key = 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";
        assert_eq!(kinds(text), ["aws_access_key", "aws_secret_key"]);
    }

    fn b64(text: &str) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    #[test]
    fn a_secret_wrapped_in_base64_once_or_twice_is_found_over_the_whole_run() {
        let env = "AWS_ACCESS_KEY_ID=AKIAQ3EGUWB6CMRXNL2T\nregion=eu-west-1\n";
        let once = b64(env);
        let text = format!("attachment .env: {once} (uploaded)");
        let hits = DETECTOR.scan(&text, None);
        assert_eq!(hits.len(), 1, "{text}");
        assert_eq!(hits[0].kind, "aws_access_key");
        assert_eq!(&text[hits[0].start..hits[0].end], once);
        let twice = b64(&format!("config: {}", b64("password=Zq8v#Lr2pX7wKt9mB4")));
        assert_eq!(kinds(&twice), ["high_entropy_secret"]);
        // URL-safe and unpadded, as tokens travel in URLs.
        let url_safe = {
            use base64::Engine as _;
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode("ghp_8hK2mPq9RvX4wLz7TnB3cJ5dF6gY1aS0eU2i")
        };
        assert_eq!(kinds(&url_safe), ["github_token"]);
    }

    #[test]
    fn base64_of_ordinary_text_or_of_binary_data_is_not_a_secret() {
        assert!(
            kinds(&b64(
                "The quarterly report is attached; see page 4 for the totals."
            ))
            .is_empty()
        );
        let png: Vec<u8> = (0u8..=255).cycle().take(600).collect();
        let binary = {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(png)
        };
        assert!(kinds(&format!("data:image/png;base64,{binary}")).is_empty());
    }

    #[test]
    fn an_aws_key_id_in_a_temporary_credential_is_found_after_a_word_boundary() {
        assert_eq!(
            kinds("creds:ASIAY34FZKBOKMUTVV7A (expires 1h)"),
            ["aws_access_key"]
        );
    }

    #[test]
    fn a_pem_private_key_is_found_whole_even_when_cut_off() {
        let text = "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7x\n-----END RSA PRIVATE KEY-----\nok";
        let hits = DETECTOR.scan(text, None);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].kind, "private_key");
        assert!(text[hits[0].start..hits[0].end].ends_with("-----END RSA PRIVATE KEY-----"));
        assert_eq!(
            kinds("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA"),
            ["private_key"]
        );
        assert!(kinds("-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A\n-----END PUBLIC KEY-----").is_empty());
    }

    #[test]
    fn vendor_tokens_are_found_by_their_formats() {
        assert_eq!(
            kinds("token ghp_8hK2mPq9RvX4wLz7TnB3cJ5dF6gY1aS0eU2i"),
            ["github_token"]
        );
        assert_eq!(
            kinds("github_pat_11ABCDEFG0123456789_abcdefghijKLMNOPQRstuv"),
            ["github_token"]
        );
        assert_eq!(
            kinds("slack: xoxb-2930184-8812093-Hq7rTz2LmWc9PxVbN4kS"),
            ["slack_token"]
        );
        assert_eq!(kinds("sk_live_4eC39HqLyjWDarjtT1zdp7dc"), ["stripe_key"]);
        assert_eq!(
            kinds("AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
            ["google_api_key"]
        );
        assert_eq!(
            kinds("sk-ant-api03-Xk2mPq9RvX4wLz7TnB3cJ5dF6gY1aS0e"),
            ["anthropic_key"]
        );
        assert_eq!(
            kinds("OPENAI=sk-proj-Xk2mPq9RvX4wLz7TnB3cJ5dF6gY1aS0eU"),
            ["openai_key"]
        );
    }

    #[test]
    fn a_jwt_is_found() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(kinds(&format!("Authorization: Bearer {jwt}")), ["jwt"]);
    }

    #[test]
    fn a_credential_assignment_with_a_random_value_is_found_and_its_key_kept() {
        let text = r#"config: {"db_password": "Zq8#vL2p!xR7mK4w"} done"#;
        let hits = DETECTOR.scan(text, None);
        assert_eq!(hits.len(), 1);
        assert_eq!(&text[hits[0].start..hits[0].end], "Zq8#vL2p!xR7mK4w");
        assert_eq!(
            kinds("SECRET: Tm9wZS5ub3RoaW5nLmhlcmU3"),
            ["high_entropy_secret"]
        );
    }

    #[test]
    fn a_credential_named_json_value_is_judged_whole() {
        let hits = DETECTOR.scan("Zq8vL2pxR7mK4wT1", Some("api_key"));
        assert_eq!(hits.len(), 1);
        assert!(
            DETECTOR
                .scan("Zq8vL2pxR7mK4wT1", Some("next_page_token"))
                .is_empty()
        );
        assert!(DETECTOR.scan("hunter2", Some("password")).is_empty());
    }

    #[test]
    fn benign_look_alikes_pass() {
        let benign = [
            "order 3f2b8c1e-4a5d-4e6f-9a7b-8c9d0e1f2a3b shipped",
            "fix: bump lockfile (sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08)",
            "commit 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12",
            "Reset your password: open the reset-password-link in the email.",
            "token: bearer-auth-config-example",
            "password=hunter2 is the classic example of a weak password",
            "the api_key field is optional; use secret: ${STRIPE_SECRET} from the vault",
            "install scikit-learn with pip install sk-learn-helpers",
            "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
            "The AKIA prefix marks long-term AWS access keys.",
            "max_tokens=4096 and token_count: 1234567890123",
        ];
        for text in benign {
            assert!(kinds(text).is_empty(), "{text}: {:?}", kinds(text));
        }
    }

    #[test]
    fn entropy_separates_random_tokens_from_words() {
        assert!(shannon_entropy("Zq8vL2pxR7mK4wT1") > MIN_ENTROPY);
        assert!(shannon_entropy("passwordpassword") < MIN_ENTROPY);
    }
}
