//! The `path_under` argument check: a path, normalised as a string, stays under a root.
//!
//! A string check: symbolic links are not resolved, so a link under the root that points
//! elsewhere is the tool's to refuse.

use percent_encoding::percent_decode_str;

/// `path` normalised: percent-encoding decoded once, backslashes read as `/`, repeated `/`
/// collapsed, `.` dropped and `..` resolved lexically (above `/` stays at `/`). Refused,
/// with the reason: a NUL, a leading `~`, a relative path, text still percent-encoded after
/// one decoding, or bytes that are not UTF-8 once decoded.
pub fn normalize(path: &str) -> Result<String, &'static str> {
    if path.contains('\0') {
        return Err("contains a NUL character");
    }
    let decoded = percent_decode_str(path)
        .decode_utf8()
        .map_err(|_| "is not UTF-8 once percent-decoded")?;
    if decoded.contains('\0') {
        return Err("contains a NUL character");
    }
    let lower = decoded.to_ascii_lowercase();
    if ["%2e", "%2f", "%5c", "%25", "%00"]
        .iter()
        .any(|e| lower.contains(e))
    {
        return Err("is percent-encoded more than once");
    }
    if decoded.starts_with('~') {
        return Err("starts with `~`");
    }
    let slashed = decoded.replace('\\', "/");
    if !slashed.starts_with('/') {
        return Err("is not an absolute path");
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in slashed.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// Whether `path` normalised is `root` normalised or below it; the error says why not,
/// without quoting the path. A relative path is read from the root (`reports/q3.csv` is
/// `<root>/reports/q3.csv`), so its `..` can climb out and is refused like any other.
pub fn path_under_check(path: &str, root: &str) -> Result<(), String> {
    let root = normalize(root).map_err(|e| format!("the limit's root {e}"))?;
    // A drive letter (`C:\…`) is another system's absolute path, never relative.
    let drive = path.as_bytes().get(1) == Some(&b':');
    let relative = !path.is_empty() && !drive && !path.starts_with(['/', '\\', '~', '%']);
    let path = if relative {
        normalize(&format!("{root}/{path}"))?
    } else {
        normalize(path)?
    };
    let inside = root == "/"
        || path == root
        || path
            .strip_prefix(root.as_str())
            .is_some_and(|rest| rest.starts_with('/'));
    if inside {
        Ok(())
    } else {
        Err(format!("resolves outside `{root}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::{normalize, path_under_check};

    const ROOT: &str = "/srv/files";

    #[test]
    fn paths_are_normalised_as_strings() {
        let cases = [
            ("/srv/files/a.txt", "/srv/files/a.txt"),
            ("/srv//files/./a.txt", "/srv/files/a.txt"),
            ("/srv/files/x/../a.txt", "/srv/files/a.txt"),
            ("\\srv\\files\\a.txt", "/srv/files/a.txt"),
            ("/srv/files/%61.txt", "/srv/files/a.txt"),
            ("/../../etc", "/etc"),
            ("/srv/files/", "/srv/files"),
        ];
        for (path, expected) in cases {
            assert_eq!(normalize(path).as_deref(), Ok(expected), "{path}");
        }
    }

    #[test]
    fn a_path_that_escapes_the_root_is_refused() {
        for path in [
            "/srv/files/../../etc/passwd",
            "/etc/passwd",
            "/srv/filesystem/secret",
            "/srv/files/..",
        ] {
            let error = path_under_check(path, ROOT).unwrap_err();
            assert_eq!(error, "resolves outside `/srv/files`", "{path}");
        }
    }

    #[test]
    fn encoded_home_relative_and_nul_paths_are_refused() {
        let cases = [
            (
                "/srv/files/%2e%2e/%2e%2e/etc/passwd",
                "resolves outside `/srv/files`",
            ),
            (
                "/srv/files/%2E%2E%2F..%2Fetc",
                "resolves outside `/srv/files`",
            ),
            ("/srv/files/..\\..\\etc", "resolves outside `/srv/files`"),
            (
                "/srv/files/%252e%252e/x",
                "is percent-encoded more than once",
            ),
            ("~/.ssh/id_rsa", "starts with `~`"),
            ("~root/.ssh", "starts with `~`"),
            ("C:\\srv\\files", "is not an absolute path"),
            ("/srv/files/a\0.txt", "contains a NUL character"),
            ("/srv/files/a%00.txt", "contains a NUL character"),
            ("/srv/files/%ff", "is not UTF-8 once percent-decoded"),
        ];
        for (path, expected) in cases {
            assert_eq!(
                path_under_check(path, ROOT).unwrap_err(),
                expected,
                "{path:?}"
            );
        }
    }

    #[test]
    fn a_relative_path_is_read_from_the_root_and_may_not_climb_out() {
        for path in [
            "reports/a.txt",
            "./notes.txt",
            "team/a/../b/plan.md",
            "v1..2/readme",
        ] {
            assert_eq!(path_under_check(path, ROOT), Ok(()), "{path}");
        }
        for path in [
            "../etc/passwd",
            "reports/../../etc/shadow",
            "..\\..\\windows\\win.ini",
        ] {
            assert_eq!(
                path_under_check(path, ROOT).unwrap_err(),
                "resolves outside `/srv/files`",
                "{path}"
            );
        }
    }

    #[test]
    fn paths_under_the_root_pass_even_when_written_oddly() {
        for path in [
            "/srv/files",
            "/srv/files/reports/q3..final.pdf",
            "/srv/files/a/b/../c.txt",
            "/srv/files/..hidden",
            "/srv/files/50% off.txt",
        ] {
            assert_eq!(path_under_check(path, ROOT), Ok(()), "{path}");
        }
        assert_eq!(path_under_check("/srv/files/a.txt", "/srv//files/"), Ok(()));
    }
}
