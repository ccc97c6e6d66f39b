//! Credential formats as their issuers document them: a fixed prefix or a fixed place (a
//! URL's password, a `sig=` parameter, a `.netrc` entry), a character set and a length.
//!
//! Each format names the literals that must appear for its pattern to run (the detector
//! builds one Aho-Corasick automaton over all of them), and which part of the match is the
//! secret: the whole match, or the capture group `s`. Every candidate then passes
//! [`super::looks_like_placeholder`] and the format's own [`Check`].

/// What a candidate must also satisfy to count.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The format is specific enough.
    Format,
    /// The value must look generated (see [`super::is_random_secret`]), for places where
    /// people also write words: a URL's password, a header's token.
    Random,
    /// The value must not be a dictionary word or a default: at least 8 characters and not
    /// letters only.
    NotAWord,
    /// The value is base64 of `user:password` with a non-empty password.
    BasicAuth,
}

pub struct Format {
    pub kind: &'static str,
    /// Case-insensitive literals; a text without any of them skips this format.
    pub keywords: &'static [&'static str],
    pub pattern: &'static str,
    pub check: Check,
}

const fn format(
    kind: &'static str,
    keywords: &'static [&'static str],
    pattern: &'static str,
    check: Check,
) -> Format {
    Format {
        kind,
        keywords,
        pattern,
        check,
    }
}

use Check::{BasicAuth, Format as Fixed, NotAWord, Random};

/// In order of precedence: where two matches overlap, the earlier format's is kept.
pub static FORMATS: &[Format] = &[
    // Private keys: PEM (PKCS#1, PKCS#8, SEC1, OpenSSH, PGP) with at least one line of key
    // material (a documentation example with `...` for a body is not a key), cut off or
    // whole; PuTTY's key files.
    format(
        "private_key",
        &["-----begin"],
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:\s|\\[nr]|[A-Za-z-]+: [^\n\\]*)*[A-Za-z0-9+/]{16}[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)",
        Fixed,
    ),
    format(
        "private_key",
        &["putty-user-key-file"],
        r"PuTTY-User-Key-File-\d+:[\s\S]*?(?:Private-MAC: [0-9a-fA-F]+|\z)",
        Fixed,
    ),
    // Cloud providers.
    format(
        "aws_access_key",
        &["akia", "asia", "abia", "acca"],
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
        Fixed,
    ),
    format(
        "aws_session_token",
        &[
            "sessiontoken",
            "session_token",
            "security_token",
            "securitytoken",
        ],
        r#"(?i:session_?token|security_?token)["']?\s*[:=]\s*["']?(?P<s>[A-Za-z0-9/+=]{100,})"#,
        Fixed,
    ),
    format(
        "google_api_key",
        &["aiza"],
        r"\bAIza[0-9A-Za-z_-]{35}",
        Fixed,
    ),
    format(
        "google_oauth_secret",
        &["gocspx-"],
        r"\bGOCSPX-[A-Za-z0-9_-]{28}",
        Fixed,
    ),
    format(
        "azure_storage_key",
        &["accountkey=", "sharedaccesskey="],
        r"(?i:AccountKey|SharedAccessKey)=(?P<s>[A-Za-z0-9+/]{40,}={0,2})",
        Fixed,
    ),
    format(
        "azure_sas_signature",
        &["sig="],
        r"[?&]sv=\d{4}-\d{2}-\d{2}&[^\s\x22'<>]*?\bsig=(?P<s>[A-Za-z0-9%+/=_-]{20,})",
        Fixed,
    ),
    format(
        "azure_client_secret",
        &["q~"],
        r"(?:^|[^A-Za-z0-9~._-])(?P<s>[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34})(?:$|[^A-Za-z0-9~._-])",
        Fixed,
    ),
    format(
        "digitalocean_token",
        &["dop_v1_", "doo_v1_", "dor_v1_"],
        r"\bdo[opr]_v1_[a-f0-9]{64}\b",
        Fixed,
    ),
    format(
        "alibaba_access_key",
        &["ltai"],
        r"\bLTAI[A-Za-z0-9]{12,20}\b",
        Fixed,
    ),
    // Source hosting and CI.
    format(
        "github_token",
        &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
        Fixed,
    ),
    format(
        "gitlab_token",
        &[
            "glpat-",
            "glrt-",
            "gldt-",
            "glptt-",
            "glcbt-",
            "gloas-",
            "glft-",
            "glimt-",
            "glsoat-",
            "gr1348941",
        ],
        r"\b(?:gl(?:pat|rt|dt|ptt|cbt|oas|ft|imt|soat)-|GR1348941)[0-9A-Za-z_-]{20,}",
        Fixed,
    ),
    format(
        "bitbucket_token",
        &["atbb"],
        r"\bATBB[A-Za-z0-9_=.-]{32,}",
        Fixed,
    ),
    format(
        "atlassian_token",
        &["atatt3"],
        r"\bATATT3[A-Za-z0-9_=-]{100,}",
        Fixed,
    ),
    format(
        "buildkite_token",
        &["bkua_"],
        r"\bbkua_[a-f0-9]{40}\b",
        Fixed,
    ),
    format(
        "circleci_token",
        &["ccipat_"],
        r"\bCCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}\b",
        Fixed,
    ),
    // Package registries.
    format("npm_token", &["npm_"], r"\bnpm_[A-Za-z0-9]{36}\b", Fixed),
    format(
        "pypi_token",
        &["pypi-ageicbwaxm5vcmc", "pypi-ageichlwas5vcmc"],
        r"\bpypi-AgE[IN]cHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        Fixed,
    ),
    format(
        "rubygems_key",
        &["rubygems_"],
        r"\brubygems_[a-f0-9]{48}\b",
        Fixed,
    ),
    format("nuget_key", &["oy2"], r"\boy2[a-z0-9]{43}\b", Fixed),
    format(
        "docker_hub_token",
        &["dckr_pat_", "dckr_oat_"],
        r"\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}",
        Fixed,
    ),
    format(
        "crates_io_token",
        &["cio"],
        r"\bcio[a-zA-Z0-9]{32}\b",
        Fixed,
    ),
    // Software-as-a-service APIs.
    format(
        "slack_token",
        &["xox"],
        r"\bxox[abposre]-[0-9A-Za-z][0-9A-Za-z-]{9,}",
        Fixed,
    ),
    format(
        "slack_webhook",
        &["hooks.slack.com"],
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>T[A-Z0-9]+/[A-Z0-9]+/[A-Za-z0-9]{16,})",
        Fixed,
    ),
    format(
        "stripe_key",
        &["sk_live_", "rk_live_"],
        r"\b[sr]k_live_[0-9A-Za-z]{16,}\b",
        Fixed,
    ),
    format(
        "anthropic_key",
        &["sk-ant-"],
        r"\bsk-ant-[A-Za-z0-9_-]{20,}",
        Fixed,
    ),
    format(
        "openai_key",
        &["sk-"],
        r"\bsk-(?:proj-|svcacct-|admin-)?(?P<s>[A-Za-z0-9_-]{20,})",
        Random,
    ),
    format(
        "sendgrid_key",
        &["sg."],
        r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b",
        Fixed,
    ),
    format("twilio_api_key", &["sk"], r"\bSK[0-9a-f]{32}\b", Fixed),
    format("mailgun_key", &["key-"], r"\bkey-[0-9a-f]{32}\b", Fixed),
    format(
        "shopify_token",
        &["shpat_", "shpca_", "shppa_", "shpss_"],
        r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b",
        Fixed,
    ),
    format(
        "huggingface_token",
        &["hf_"],
        r"\bhf_[A-Za-z0-9]{34,40}\b",
        Fixed,
    ),
    format(
        "linear_key",
        &["lin_api_"],
        r"\blin_api_[A-Za-z0-9]{40}\b",
        Fixed,
    ),
    format(
        "notion_token",
        &["ntn_", "secret_"],
        r"\b(?:ntn_[A-Za-z0-9]{46}|secret_[A-Za-z0-9]{43})\b",
        Fixed,
    ),
    // Infrastructure.
    format(
        "vault_token",
        &["hvs.", "hvb.", "hvr."],
        r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}",
        Fixed,
    ),
    format(
        "terraform_token",
        &[".atlasv1."],
        r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}",
        Fixed,
    ),
    format(
        "jwt",
        &["eyj"],
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        Fixed,
    ),
    // Credentials in fixed places.
    format(
        "url_password",
        &["://"],
        r"(?i:\b[a-z][a-z0-9+.:-]*)://[^\s:/@?#'\x22<>]+:(?P<s>[^\s@/?#'\x22<>]+)@[A-Za-z0-9.\[\]-]",
        NotAWord,
    ),
    format(
        "connection_string_password",
        &["password=", "pwd="],
        r"(?i:;\s*(?:password|pwd)\s*=)(?P<s>[^;\s'\x22]+)",
        NotAWord,
    ),
    format(
        "netrc_password",
        &["machine"],
        r"\bmachine\s+\S+\s+(?:login\s+\S+\s+)?password\s+(?P<s>\S+)",
        NotAWord,
    ),
    format(
        "basic_auth",
        &["\"auth\""],
        r#""auth"\s*:\s*"(?P<s>[A-Za-z0-9+/]{8,}={0,2})""#,
        BasicAuth,
    ),
    format(
        "authorization_header",
        &["authorization", "x-api-key", "-token:", "-key:", "-secret:"],
        r"(?i:\bauthorization\s*:\s*(?:bearer|token|basic|apikey)\s+|\bx-[a-z-]*(?:key|token|secret)\s*:\s*)(?P<s>[A-Za-z0-9._~+/=-]{16,})",
        Random,
    ),
    format(
        "totp_seed",
        &["otpauth://"],
        r"otpauth://[th]otp/[^\s?]*\?(?:[^\s#]*&)?secret=(?P<s>[A-Za-z2-7]{16,}=*)",
        Fixed,
    ),
    format(
        "totp_seed",
        &[
            "authenticator",
            "two-factor",
            "2fa",
            "totp",
            "mfa",
            "one-time",
        ],
        r"\b(?P<s>(?:[A-Z2-7]{4}[ -]){3,}[A-Z2-7]{4})\b",
        Fixed,
    ),
];

/// Values that providers publish in their documentation as examples; never real.
pub static DOCUMENTED_EXAMPLES: &[&str] = &[
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "JBSWY3DPEHPK3PXP",
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
];
