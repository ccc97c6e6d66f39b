//! Parsing `learn` paths. Anything that is not exactly one of the three shapes is refused
//! before it can touch the catalog: no `..`, no percent-encoding, no empty segments.

use crate::slug::Slug;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LearnPath {
    /// `/roles`: every role of the scope, described (what `init_skilder` may only name).
    Roles,
    Role(Slug),
    Skill(Slug),
    Resource(Slug, Slug),
}

pub const LEARN_PATH_HELP: &str = "learn paths look like /roles, /roles/<role>, /<skill> or /<skill>/<resource>, in lowercase kebab-case";

pub fn parse(path: &str) -> Result<LearnPath, String> {
    let refuse = |why: &str| {
        format!(
            "`{}` is not a learn path: {why}; {LEARN_PATH_HELP}",
            path.escape_debug()
        )
    };
    let Some(rest) = path.strip_prefix('/') else {
        return Err(refuse("it must start with `/`"));
    };
    if path.contains('%') {
        return Err(refuse("percent-encoding is not accepted"));
    }
    if path.contains('\\') || path.chars().any(char::is_control) {
        return Err(refuse(
            "it contains characters that are never part of a path",
        ));
    }
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(refuse("it has an empty segment (`//` or a trailing `/`)"));
    }
    if segments.iter().any(|s| *s == "." || *s == "..") {
        return Err(refuse("`.` and `..` are not accepted"));
    }
    let slug = |s: &str| Slug::parse(s).map_err(|e| refuse(&e.to_string()));
    match segments.as_slice() {
        ["roles", role] => Ok(LearnPath::Role(slug(role)?)),
        ["roles"] => Ok(LearnPath::Roles),
        [skill] => Ok(LearnPath::Skill(slug(skill)?)),
        [skill, resource] => Ok(LearnPath::Resource(slug(skill)?, slug(resource)?)),
        _ => Err(refuse("it has too many segments")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_path_shapes_parse() {
        assert_eq!(
            parse("/roles/tier-1-support").unwrap(),
            LearnPath::Role(Slug::parse("tier-1-support").unwrap())
        );
        assert_eq!(
            parse("/refund-handling").unwrap(),
            LearnPath::Skill(Slug::parse("refund-handling").unwrap())
        );
        assert_eq!(
            parse("/refund-handling/refund-policy").unwrap(),
            LearnPath::Resource(
                Slug::parse("refund-handling").unwrap(),
                Slug::parse("refund-policy").unwrap()
            )
        );
    }

    #[test]
    fn bare_roles_is_the_catalog_listing() {
        assert_eq!(parse("/roles").unwrap(), LearnPath::Roles);
    }

    #[test]
    fn traversal_encoding_and_malformed_paths_are_refused_with_the_reason() {
        for (bad, reason) in [
            ("/roles/../system-admin", "`..`"),
            ("/roles/%2e%2e/system-admin", "percent-encoding"),
            ("//roles/tier-1-support", "empty segment"),
            ("/roles//tier-1-support", "empty segment"),
            ("/roles/tier-1-support/", "empty segment"),
            ("roles/tier-1-support", "start with"),
            ("/Roles/Tier-1", "not a slug"),
            ("/a/b/c", "too many segments"),
            ("/roles/a\\b", "never part of a path"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(reason), "{bad}: {err}");
        }
    }
}
