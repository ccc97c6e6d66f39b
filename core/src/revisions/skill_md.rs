//! Agent Skills `SKILL.md`: YAML frontmatter (`name`, `description`, optional fields)
//! followed by the markdown instructions.

use serde::Deserialize;

use crate::slug::Slug;

pub const MAX_DESCRIPTION: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillMdError {
    #[error("SKILL.md must start with a `---` line that opens its YAML frontmatter")]
    NoFrontmatter,
    #[error("SKILL.md frontmatter is not closed by a `---` line")]
    Unclosed,
    #[error("SKILL.md frontmatter is not valid YAML: {0}")]
    Yaml(String),
    #[error("SKILL.md `name` must be 1–64 lowercase letters, digits and single hyphens: {0}")]
    Name(String),
    #[error("SKILL.md `name` is `{found}` but this is skill `{expected}`")]
    WrongSkill { found: String, expected: String },
    #[error("SKILL.md `description` must be 1–1024 characters (it has {0})")]
    Description(usize),
    #[error("SKILL.md has no instructions after its frontmatter")]
    EmptyBody,
}

#[derive(Deserialize)]
struct Frontmatter {
    name: Option<String>,
    description: Option<String>,
}

/// A validated `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillMd {
    pub name: Slug,
    pub description: String,
    pub instructions: String,
}

impl SkillMd {
    /// Parses and validates `text` as the `SKILL.md` of skill `expected`.
    pub fn parse(text: &str, expected: &str) -> Result<Self, SkillMdError> {
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
        }
        if !closed {
            return Err(SkillMdError::Unclosed);
        }
        let body: String = lines.collect();
        let front: Frontmatter =
            serde_norway::from_str(&yaml).map_err(|e| SkillMdError::Yaml(e.to_string()))?;
        let name = front.name.unwrap_or_default();
        let name = Slug::parse(name.trim()).map_err(|e| SkillMdError::Name(e.to_string()))?;
        if name.as_str() != expected {
            return Err(SkillMdError::WrongSkill {
                found: name.to_string(),
                expected: expected.to_owned(),
            });
        }
        let description = front.description.unwrap_or_default().trim().to_owned();
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
        })
    }

    /// Renders a skill version as `SKILL.md`, for export.
    pub fn render(name: &str, description: &str, instructions: &str) -> String {
        let front = serde_norway::to_string(&serde_json::json!({
            "name": name,
            "description": description,
        }))
        .unwrap_or_default();
        format!("---\n{front}---\n\n{}\n", instructions.trim())
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
    }

    #[test]
    fn a_rendered_skill_md_parses_back() {
        let text = SkillMd::render("refund-handling", "Issue refunds: carefully.", "# R\n\nx");
        let md = SkillMd::parse(&text, "refund-handling").unwrap();
        assert_eq!(
            (md.description.as_str(), md.instructions.as_str()),
            ("Issue refunds: carefully.", "# R\n\nx")
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
