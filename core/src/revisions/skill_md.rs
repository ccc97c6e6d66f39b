//! Agent Skills `SKILL.md`: YAML frontmatter (`name`, `description`, optional fields)
//! followed by the markdown instructions.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::model::Skill;
use crate::slug::Slug;

pub const MAX_DESCRIPTION: usize = 1024;
/// The largest `SKILL.md` read: 256 KiB (a frontmatter at its limit, instructions at the
/// 64 KiB a proposal may hold, and room for markup).
pub const MAX_SKILL_MD_BYTES: usize = 256 * 1024;
/// The largest frontmatter read: 64 KiB, far above what `name`, `description`, `license`,
/// `metadata` and `allowed-tools` take, and refused before the YAML is parsed.
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;

/// What is wrong with a `SKILL.md`, naming the part (the caller names the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillMdError {
    #[error("is {0} bytes; a SKILL.md may be at most {MAX_SKILL_MD_BYTES} bytes (256 KiB)")]
    TooLarge(usize),
    #[error(
        "frontmatter is more than {MAX_FRONTMATTER_BYTES} bytes; at most {MAX_FRONTMATTER_BYTES} bytes (64 KiB) are accepted"
    )]
    FrontmatterTooLarge,
    #[error("must start with a `---` line that opens its YAML frontmatter")]
    NoFrontmatter,
    #[error("frontmatter is not closed by a `---` line")]
    Unclosed,
    #[error("frontmatter is not valid YAML: {0}")]
    Yaml(String),
    #[error("frontmatter must be a YAML mapping of field names to values")]
    NotAMapping,
    #[error("frontmatter name must be 1–64 lowercase letters, digits and single hyphens: {0}")]
    Name(String),
    #[error("frontmatter name is `{found}` but this is skill `{expected}`")]
    WrongSkill { found: String, expected: String },
    #[error("frontmatter description must be 1–1024 characters (it has {0})")]
    Description(usize),
    #[error("has no instructions after its frontmatter")]
    EmptyBody,
}

/// A validated `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillMd {
    pub name: Slug,
    pub description: String,
    pub instructions: String,
    /// Frontmatter fields besides `name` and `description`.
    pub extra: Map<String, Value>,
}

/// The frontmatter as it is written: `name` and `description` first, then the others in
/// key order.
#[derive(Serialize)]
struct Frontmatter<'a> {
    name: &'a str,
    description: &'a str,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

impl SkillMd {
    /// Parses and validates `text` as the `SKILL.md` of skill `expected`.
    pub fn parse(text: &str, expected: &str) -> Result<Self, SkillMdError> {
        let md = Self::parse_any(text)?;
        if md.name.as_str() != expected {
            return Err(SkillMdError::WrongSkill {
                found: md.name.to_string(),
                expected: expected.to_owned(),
            });
        }
        Ok(md)
    }

    /// Parses and validates `text` as a `SKILL.md` of whichever skill it names.
    pub fn parse_any(text: &str) -> Result<Self, SkillMdError> {
        if text.len() > MAX_SKILL_MD_BYTES {
            return Err(SkillMdError::TooLarge(text.len()));
        }
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut lines = text.split_inclusive('\n');
        if lines.next().map(str::trim_end) != Some("---") {
            return Err(SkillMdError::NoFrontmatter);
        }
        let mut yaml = String::new();
        let mut closed = false;
        for line in lines.by_ref() {
            if line.trim_end() == "---" {
                closed = true;
                break;
            }
            yaml.push_str(line);
            if yaml.len() > MAX_FRONTMATTER_BYTES {
                return Err(SkillMdError::FrontmatterTooLarge);
            }
        }
        if !closed {
            return Err(SkillMdError::Unclosed);
        }
        let body: String = lines.collect();
        let front: Value =
            serde_norway::from_str(&yaml).map_err(|e| SkillMdError::Yaml(e.to_string()))?;
        let Value::Object(mut extra) = front else {
            return Err(SkillMdError::NotAMapping);
        };
        let name = match extra.remove("name") {
            Some(Value::String(name)) => name,
            Some(other) => return Err(SkillMdError::Name(format!("`{other}` is not text"))),
            None => String::new(),
        };
        let name = Slug::parse(name.trim()).map_err(|e| SkillMdError::Name(e.to_string()))?;
        let description = match extra.remove("description") {
            Some(Value::String(d)) => d.trim().to_owned(),
            _ => String::new(),
        };
        let chars = description.chars().count();
        if chars == 0 || chars > MAX_DESCRIPTION {
            return Err(SkillMdError::Description(chars));
        }
        let instructions = body.trim().to_owned();
        if instructions.is_empty() {
            return Err(SkillMdError::EmptyBody);
        }
        Ok(Self {
            name,
            description,
            instructions,
            extra,
        })
    }

    /// Renders a `SKILL.md` from its parts: frontmatter (`name`, `description`, then
    /// `extra`), a blank line, the instructions.
    pub fn render(
        name: &str,
        description: &str,
        extra: &Map<String, Value>,
        instructions: &str,
    ) -> String {
        let front = serde_norway::to_string(&Frontmatter {
            name,
            description,
            extra,
        })
        .unwrap_or_default();
        format!("---\n{front}---\n\n{}\n", instructions.trim())
    }

    /// A skill version's `SKILL.md` rendered from its fields.
    pub fn render_skill(skill: &Skill) -> String {
        Self::render(
            skill.slug.as_str(),
            &skill.description,
            &skill.frontmatter_extra,
            &skill.instructions,
        )
    }

    /// Whether this file says what `skill` holds: same name, description, instructions
    /// and extra frontmatter.
    pub fn describes(&self, skill: &Skill) -> bool {
        self.name == skill.slug
            && self.description == skill.description.trim()
            && self.instructions == skill.instructions.trim()
            && self.extra == skill.frontmatter_extra
    }
}

/// The `SKILL.md` of a skill version: `verbatim` (the file it was uploaded as) when that
/// still describes the version exactly, otherwise rendered from the version's fields.
pub fn skill_md_text(skill: &Skill, verbatim: Option<&str>) -> String {
    match verbatim {
        Some(text) if SkillMd::parse_any(text).is_ok_and(|md| md.describes(skill)) => {
            text.to_owned()
        }
        _ => SkillMd::render_skill(skill),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "---\nname: refund-handling\ndescription: Issue refunds within policy.\nlicense: Apache-2.0\n---\n\n# Refunds\n\nCheck eligibility first.\n";

    #[test]
    fn a_valid_skill_md_yields_its_description_and_instructions() {
        let md = SkillMd::parse(GOOD, "refund-handling").unwrap();
        assert_eq!(md.description, "Issue refunds within policy.");
        assert_eq!(md.instructions, "# Refunds\n\nCheck eligibility first.");
        assert_eq!(
            md.extra.get("license"),
            Some(&Value::String("Apache-2.0".into()))
        );
        assert_eq!(md.extra.len(), 1);
    }

    #[test]
    fn frontmatter_that_is_not_a_mapping_is_refused() {
        assert_eq!(
            SkillMd::parse("---\n- a\n---\nbody", "x"),
            Err(SkillMdError::NotAMapping)
        );
        assert!(matches!(
            SkillMd::parse("---\nname: 7\ndescription: d\n---\nbody", "x"),
            Err(SkillMdError::Name(_))
        ));
    }

    #[test]
    fn a_rendered_skill_md_parses_back() {
        let mut extra = Map::new();
        extra.insert("license".into(), Value::String("Apache-2.0".into()));
        extra.insert(
            "metadata".into(),
            serde_json::json!({"author": "support", "version": "1.2"}),
        );
        let text = SkillMd::render(
            "refund-handling",
            "Issue refunds: carefully.",
            &extra,
            "# R\n\nx",
        );
        assert!(text.starts_with("---\nname: refund-handling\n"), "{text}");
        let md = SkillMd::parse(&text, "refund-handling").unwrap();
        assert_eq!(
            (md.description.as_str(), md.instructions.as_str(), &md.extra),
            ("Issue refunds: carefully.", "# R\n\nx", &extra)
        );
    }

    #[test]
    fn names_that_break_the_agent_skills_rules_are_refused() {
        for name in [
            "Refund-Handling",
            "refund--handling",
            "-refund",
            "refund-",
            "",
            &"a".repeat(65),
        ] {
            let text = GOOD.replace("name: refund-handling", &format!("name: \"{name}\""));
            assert!(
                matches!(SkillMd::parse(&text, name), Err(SkillMdError::Name(_))),
                "{name}"
            );
        }
        let max = "a".repeat(64);
        let text = GOOD.replace("name: refund-handling", &format!("name: {max}"));
        assert!(SkillMd::parse(&text, &max).is_ok());
    }

    #[test]
    fn a_name_of_another_skill_is_refused() {
        assert_eq!(
            SkillMd::parse(GOOD, "customer-lookup"),
            Err(SkillMdError::WrongSkill {
                found: "refund-handling".into(),
                expected: "customer-lookup".into()
            })
        );
    }

    #[test]
    fn descriptions_must_have_1_to_1024_characters() {
        let empty = GOOD.replace("Issue refunds within policy.", "\"\"");
        assert_eq!(
            SkillMd::parse(&empty, "refund-handling"),
            Err(SkillMdError::Description(0))
        );
        let long = GOOD.replace("Issue refunds within policy.", &"é".repeat(1025));
        assert_eq!(
            SkillMd::parse(&long, "refund-handling"),
            Err(SkillMdError::Description(1025))
        );
        let max = GOOD.replace("Issue refunds within policy.", &"é".repeat(1024));
        assert!(SkillMd::parse(&max, "refund-handling").is_ok());
    }

    #[test]
    fn a_frontmatter_or_file_over_its_limit_is_refused_naming_the_limit() {
        let padding = format!(
            "metadata:\n  notes: \"{}\"\n",
            "x".repeat(MAX_FRONTMATTER_BYTES)
        );
        let big = GOOD.replacen("---\n", &format!("---\n{padding}"), 1);
        let err = SkillMd::parse(&big, "refund-handling").unwrap_err();
        assert_eq!(err, SkillMdError::FrontmatterTooLarge);
        assert!(
            err.to_string().contains("at most 65536 bytes (64 KiB)"),
            "{err}"
        );
        let near = GOOD.replacen(
            "---\n",
            &format!(
                "---\nnotes: \"{}\"\n",
                "x".repeat(MAX_FRONTMATTER_BYTES - 200)
            ),
            1,
        );
        assert!(SkillMd::parse(&near, "refund-handling").is_ok());
        let long = format!("{GOOD}{}", "y".repeat(MAX_SKILL_MD_BYTES));
        let err = SkillMd::parse(&long, "refund-handling").unwrap_err();
        assert_eq!(err, SkillMdError::TooLarge(long.len()));
        assert!(
            err.to_string().ends_with("at most 262144 bytes (256 KiB)"),
            "{err}"
        );
    }

    #[test]
    fn a_frontmatter_whose_aliases_expand_without_bound_is_refused_within_its_limit() {
        let mut yaml = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (from, to) in ('a'..'j').zip('b'..='j') {
            yaml.push_str(&format!(
                "{to}: &{to} [*{from}, *{from}, *{from}, *{from}, *{from}, *{from}, *{from}, *{from}, *{from}, *{from}]\n"
            ));
        }
        let text = format!("---\nname: x\ndescription: d\n{yaml}---\nBody.\n");
        assert!(text.len() < MAX_FRONTMATTER_BYTES);
        assert!(matches!(
            SkillMd::parse_any(&text),
            Err(SkillMdError::Yaml(_))
        ));
    }

    #[test]
    fn missing_or_broken_frontmatter_is_refused_clearly() {
        assert_eq!(
            SkillMd::parse("# Refunds", "x"),
            Err(SkillMdError::NoFrontmatter)
        );
        assert_eq!(
            SkillMd::parse("---\nname: x\n", "x"),
            Err(SkillMdError::Unclosed)
        );
        assert!(matches!(
            SkillMd::parse("---\nname: [x\n---\nbody", "x"),
            Err(SkillMdError::Yaml(_))
        ));
        assert_eq!(
            SkillMd::parse("---\nname: x\ndescription: d\n---\n  \n", "x"),
            Err(SkillMdError::EmptyBody)
        );
    }
}
