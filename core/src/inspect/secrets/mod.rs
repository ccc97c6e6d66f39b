//! Credential detectors: the formats issuers document ([`formats`]), the AWS secret key
//! beside its key id, and high-entropy values assigned to a credential-named key
//! (`password=`, `"token": …`), in the text and inside base64 runs that wrap it (a
//! credential file or an `.env` sent encoded): such a run is reported whole, so redaction
//! removes all of it. Text with invisible characters inside it (a token split by zero-width
//! spaces) is read without them, and each hit is mapped back to the original span.

mod formats;

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use base64::Engine as _;
use regex::Regex;

use super::normalize::{MAX_UNWRAP_DEPTH, is_hidden, wrapped};
use formats::{Check, DOCUMENTED_EXAMPLES, FORMATS};

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
/// A hex value assigned to a credential name is a secret from this length on (API keys
/// and auth tokens of 128 bits and more); shorter hex is more often a short id.
const MIN_HEX_SECRET: usize = 32;

/// Keywords that let the assignment and AWS secret detectors run.
static ASSIGNMENT_KEYWORDS: &[&str] = &[
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "credential",
    "auth",
];

pub struct SecretDetector {
    /// Every format's keywords, then [`ASSIGNMENT_KEYWORDS`]; case-insensitive.
    keywords: AhoCorasick,
    /// For each keyword pattern: the index of its format, or `None` for an assignment one.
    keyword_format: Vec<Option<usize>>,
    /// One per [`FORMATS`] entry, with whether it has the `s` group.
    formats: Vec<(Regex, bool)>,
    assignment: Regex,
    aws_secret: Regex,
    credential_key: Regex,
}

impl SecretDetector {
    pub fn new() -> Self {
        let mut keywords = Vec::new();
        let mut keyword_format = Vec::new();
        for (index, format) in FORMATS.iter().enumerate() {
            for keyword in format.keywords {
                keywords.push(*keyword);
                keyword_format.push(Some(index));
            }
        }
        for keyword in ASSIGNMENT_KEYWORDS {
            keywords.push(*keyword);
            keyword_format.push(None);
        }
        Self {
            keywords: AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::Standard)
                .build(&keywords)
                .expect("keywords compile"),
            keyword_format,
            formats: FORMATS
                .iter()
                .map(|f| {
                    let re = Regex::new(&ascii_boundaries(f.pattern))
                        .expect("secret format compiles");
                    let grouped = re.capture_names().any(|n| n == Some("s"));
                    (re, grouped)
                })
                .collect(),
            assignment: Regex::new(&ascii_boundaries(
                r#"(?i)\b((?:[a-z0-9]+[_-])*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|auth|credentials?))["']?\s*(?:=>|[:=])\s*["']?([^\s"'`,;&<>(){}\[\]]+)"#,
            ))
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
        // Every hidden character is beyond ASCII, and the ASCII test is a vectorised pass.
        if text.is_ascii() || !text.chars().any(is_hidden) {
            return self.scan_visible(text, key);
        }
        // `offsets[i]`: where byte `i` of the visible text is in `text`.
        let mut visible = String::with_capacity(text.len());
        let mut offsets = Vec::with_capacity(text.len());
        for (at, c) in text.char_indices() {
            if !is_hidden(c) {
                visible.push(c);
                offsets.extend(at..at + c.len_utf8());
            }
        }
        let mut hits = self.scan_visible(&visible, key);
        for hit in &mut hits {
            let last = offsets[hit.end - 1];
            hit.start = offsets[hit.start];
            hit.end = last + 1;
        }
        hits
    }

    fn scan_visible(&self, text: &str, key: Option<&str>) -> Vec<Hit> {
        let mut hits = Vec::new();
        self.scan_patterns(text, &mut hits);
        self.scan_wrapped(text, 0, &mut hits);
        if hits.is_empty()
            && key.is_some_and(|key| self.is_credential_key(key))
            && is_assigned_secret(text)
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
        let mut run = vec![false; FORMATS.len()];
        let mut assignments = false;
        for m in self.keywords.find_overlapping_iter(text) {
            match self.keyword_format[m.pattern().as_usize()] {
                Some(index) => run[index] = true,
                None => assignments = true,
            }
        }
        for (index, format) in FORMATS.iter().enumerate() {
            if !run[index] {
                continue;
            }
            let (re, grouped) = &self.formats[index];
            if *grouped {
                for caps in re.captures_iter(text) {
                    let whole = caps.get(0).expect("group 0");
                    let value = caps.name("s").unwrap_or(whole);
                    if passes(format.check, value.as_str()) {
                        push(hits, format.kind, value.start(), value.end());
                    }
                }
            } else {
                for m in re.find_iter(text) {
                    if passes(format.check, m.as_str()) {
                        push(hits, format.kind, m.start(), m.end());
                    }
                }
            }
        }
        if !assignments {
            hits.sort_by_key(|h| h.start);
            return;
        }
        let lower = text.to_ascii_lowercase();
        if hits.iter().any(|h| h.kind == "aws_access_key")
            || lower.contains("aws_secret")
            || lower.contains("secretaccesskey")
        {
            for caps in self.aws_secret.captures_iter(text) {
                let m = caps.get(1).expect("group 1");
                if is_random_secret(m.as_str()) && !looks_like_placeholder(m.as_str()) {
                    push(hits, "aws_secret_key", m.start(), m.end());
                }
            }
        }
        for caps in self.assignment.captures_iter(text) {
            let (key, value) = (&caps[1], caps.get(2).expect("group 2"));
            if !names_a_non_secret(key) && is_assigned_secret(value.as_str()) {
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
            self.scan_patterns(&decoded, &mut inner);
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

    /// Whether a JSON key names a credential, in snake, kebab or camel case
    /// (`client_secret`, `x-api-key`, `SessionToken`).
    fn is_credential_key(&self, key: &str) -> bool {
        let mut snake = String::with_capacity(key.len() + 4);
        let mut previous_lower = false;
        for c in key.chars() {
            if c.is_ascii_uppercase() && previous_lower {
                snake.push('_');
            }
            previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            snake.push(c.to_ascii_lowercase());
        }
        !names_a_non_secret(&snake) && self.credential_key.is_match(&snake)
    }
}

/// Paging cursors, token counts, digests and the like are named like credentials and are
/// not.
fn names_a_non_secret(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    [
        "page",
        "cursor",
        "next",
        "count",
        "type",
        "limit",
        "usage",
        "expires",
        "name",
        "id",
        "hash",
        "sha",
        "digest",
        "checksum",
        "fingerprint",
        "etag",
        "last4",
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

/// Whether a candidate of a format counts: it is no documentation example or placeholder,
/// and it passes the format's own check. Only the value is judged: the context a format
/// matches around it (`login ops@example.com`) says nothing about it.
fn passes(check: Check, value: &str) -> bool {
    if looks_like_placeholder(value) {
        return false;
    }
    match check {
        Check::Format => true,
        Check::Random => is_random_secret(value),
        Check::NotAWord => {
            value.chars().count() >= 8
                && !value.chars().all(|c| c.is_alphabetic())
                && !value.starts_with(['$', '{', '<', '%', '['])
        }
        Check::BasicAuth => base64::engine::general_purpose::STANDARD
            .decode(value)
            .ok()
            .and_then(|raw| String::from_utf8(raw).ok())
            .and_then(|pair| {
                pair.split_once(':')
                    .map(|(user, password)| !user.is_empty() && !password.is_empty())
            })
            .unwrap_or(false),
    }
}

/// Whether `value` is a documentation example, a placeholder or what redaction left:
/// a value providers publish as an example, one that says it is one (`your_key_here`,
/// `EXAMPLE`, `xxxx`), or one of so few distinct characters that it was typed, not
/// generated (`ghp_XXXXXXXX…`, `000000-0000`).
pub fn looks_like_placeholder(value: &str) -> bool {
    if DOCUMENTED_EXAMPLES.iter().any(|e| value.contains(e)) {
        return true;
    }
    // Long values (key blocks) are random enough to spell a short word by chance.
    if value.len() <= 120 {
        let lower = value.to_ascii_lowercase();
        let words = [
            "example",
            "your",
            "replace",
            "placeholder",
            "dummy",
            "xxxx",
            "****",
            "0000000",
            "redacted",
            "changeme",
            "sample",
        ];
        if words.iter().any(|w| lower.contains(w)) {
            return true;
        }
    }
    let mut seen = [false; 128];
    let mut distinct = 0;
    for b in value.bytes().filter(u8::is_ascii) {
        if !seen[usize::from(b)] {
            seen[usize::from(b)] = true;
            distinct += 1;
        }
    }
    value.len() >= 12 && distinct < 8
}

/// Whether a value assigned to a credential name is a secret: a generated-looking value,
/// or a long hex one (API keys and auth tokens are often hex; digests are named as such).
fn is_assigned_secret(value: &str) -> bool {
    if looks_like_placeholder(value) {
        return false;
    }
    if is_random_secret(value) {
        return true;
    }
    let len = value.chars().count();
    let hex = (MIN_HEX_SECRET..=512).contains(&len)
        && value.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        && value.chars().any(|c| c.is_ascii_digit())
        && value.chars().any(|c| c.is_ascii_alphabetic());
    // A typed password need not have a digit: both cases and a symbol, random enough.
    let symbols = (MIN_VALUE_LEN..=128).contains(&len)
        && value.chars().any(|c| c.is_ascii_lowercase())
        && value.chars().any(|c| c.is_ascii_uppercase())
        && value
            .chars()
            .any(|c| c.is_ascii_punctuation() && !matches!(c, '-' | '_' | '.' | '/'))
        && !value.starts_with(['$', '<', '[', '{', '%'])
        && shannon_entropy(value) >= MIN_ENTROPY;
    hex || symbols
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

/// A secret pattern with ASCII word boundaries. Secrets are ASCII, and so is every pattern
/// around its `\b`; a Unicode `\b` differs only beside a letter beyond ASCII (`é` counts
/// as a word character there, so `éAKIA…` would not be a boundary), and it makes regex's
/// lazy DFA give up at the first such byte of the text, leaving the PikeVM to search the
/// rest at about 1 µs a byte. Reading such a letter as a boundary errs toward finding.
fn ascii_boundaries(pattern: &str) -> String {
    pattern.replace(r"\b", r"(?-u:\b)")
}

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
    fn issuers_documented_formats_are_found_by_kind() {
        let cases = [
            ("GITLAB_TOKEN=glpat-Xk2mPq9RvX4wLz7TnB3c", "gitlab_token"),
            (
                "//registry.npmjs.org/:_authToken=npm_8hK2mPq9RvX4wLz7TnB3cJ5dF6gY1aS0eU2i",
                "npm_token",
            ),
            (
                "VAULT_TOKEN=hvs.CAESIXk2mPq9RvX4wLz7TnB3cJ5dF6gY1aS0e",
                "vault_token",
            ),
            (
                "DATABASE_URL=postgres://app:Zq8vL2pxR7mK4w@db:5432/orders",
                "url_password",
            ),
            (
                "machine api.example.com login ops@example.com password 7f3a9c2e-1b4d-4e8f-a6c5",
                "netrc_password",
            ),
            (
                r#"{"auths": {"ghcr.io": {"auth": "Y2ktYm90OlpxOHZMMnB4UjdtSzR3"}}}"#,
                "basic_auth",
            ),
            (
                "otpauth://totp/Acme:dana?secret=KRSXG5CTMVRXEZLUKN2XAZLSKNSWC4TF&issuer=Acme",
                "totp_seed",
            ),
            (
                "AccountName=acme;AccountKey=Zq8vL2pxR7mK4wT1Zq8vL2pxR7mK4wT1Zq8vL2pxR7mK4wT1==;EndpointSuffix=core.windows.net",
                "azure_storage_key",
            ),
        ];
        for (text, kind) in cases {
            assert_eq!(kinds(text), [kind], "{text}");
        }
    }

    #[test]
    fn documentation_examples_and_placeholders_are_not_secrets() {
        let examples = [
            "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "GITHUB_TOKEN=ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
            "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
            "postgres://USER:PASSWORD@HOST:5432/db and amqp://guest:guest@localhost:5672/",
            "//registry.npmjs.org/:_authToken=${NPM_TOKEN}",
        ];
        for text in examples {
            assert!(kinds(text).is_empty(), "{text}: {:?}", kinds(text));
        }
    }

    #[test]
    fn a_token_glued_to_a_letter_beyond_ascii_is_found() {
        for text in [
            "clé:AKIAQ3EGUWB6CMRXNL2T",
            "cléAKIAQ3EGUWB6CMRXNL2Tß",
            "jeton ghp_8hK2mPq9RvX4wLz7TnB3cJ5dF6gY1aS0eU2i—expiré",
        ] {
            let hits = DETECTOR.scan(text, None);
            assert_eq!(hits.len(), 1, "{text}");
        }
    }

    #[test]
    fn a_token_split_by_invisible_characters_is_found_over_its_whole_span() {
        let token = "ghp_8hK2mPq9RvX4wLz7TnB3cJ5dF6gY1aS0eU2i";
        let hidden: String = token
            .chars()
            .enumerate()
            .flat_map(|(i, c)| [Some(c), (i % 5 == 0).then_some('\u{200B}')])
            .flatten()
            .collect();
        let text = format!("token: {hidden} ok");
        let hits = DETECTOR.scan(&text, None);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].kind, "github_token");
        let span = &text[hits[0].start..hits[0].end];
        assert_eq!(span.replace('\u{200B}', ""), token);
    }

    #[test]
    fn a_camel_case_credential_key_makes_its_value_a_candidate() {
        let value = "IQoJb3JpZ2luX2VjEXk2mPq9RvX4wLz7TnB3cJ5dF6gY1aS0e";
        assert_eq!(DETECTOR.scan(value, Some("SessionToken")).len(), 1);
        assert_eq!(DETECTOR.scan(value, Some("clientSecret")).len(), 1);
        assert!(DETECTOR.scan(value, Some("tokenHash")).is_empty());
    }

    #[test]
    fn a_typed_password_with_symbols_needs_no_digit() {
        assert_eq!(
            kinds("'password' => 'EvwJ%DCBnxOkqHUCFdw',"),
            ["high_entropy_secret"]
        );
        assert!(kinds("password: CorrectHorseBatteryStaple").is_empty());
    }

    #[test]
    fn entropy_separates_random_tokens_from_words() {
        assert!(shannon_entropy("Zq8vL2pxR7mK4wT1") > MIN_ENTROPY);
        assert!(shannon_entropy("passwordpassword") < MIN_ENTROPY);
    }
}
