//! Which roles of a scope an agent's task summary points at, so `init_skilder` can
//! describe those and only name the others: a scope of many roles otherwise costs every
//! session a description per role before the agent has done anything.
//!
//! The score is plain word overlap, deterministic and explainable: a task word found in
//! the role's name or title counts 3, in a skill name 2, in the description 1. Words are
//! lowercased, split on anything not alphanumeric, and a plural `s` is dropped.

use std::collections::HashSet;

use crate::model::Role;

/// Words too common to say anything about a task.
const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "from", "that", "this", "what", "their", "they", "them", "into",
    "about", "have", "has", "was", "are", "our", "your", "you", "his", "her", "its", "any", "all",
    "can", "will", "should", "need", "needs", "please", "some", "who", "how", "why", "when",
    "where", "which", "then", "than", "but", "not", "get", "make", "want",
];

/// Indices into `roles` of at most `limit` roles that share a word with `task`, best
/// first; ties keep catalog order. Empty when no role shares a word.
pub fn matching_roles(task: &str, roles: &[&Role], limit: usize) -> Vec<usize> {
    let task_words = words(task);
    if task_words.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(usize, u32)> = roles
        .iter()
        .enumerate()
        .map(|(index, role)| (index, score(&task_words, role)))
        .filter(|(_, score)| *score > 0)
        .collect();
    // Stable: equal scores stay in catalog order.
    scored.sort_by_key(|&(_, score)| std::cmp::Reverse(score));
    scored
        .into_iter()
        .take(limit)
        .map(|(index, _)| index)
        .collect()
}

fn score(task_words: &HashSet<String>, role: &Role) -> u32 {
    let name = words(&format!("{} {}", role.slug, role.title));
    let skills = words(
        &role
            .skills
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(" "),
    );
    let description = words(&role.description);
    task_words
        .iter()
        .map(|word| {
            if name.contains(word) {
                3
            } else if skills.contains(word) {
                2
            } else if description.contains(word) {
                1
            } else {
                0
            }
        })
        .sum()
}

fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|word| word.chars().count() >= 3 && !STOPWORDS.contains(&word.as_str()))
        .map(|word| match word.strip_suffix('s') {
            Some(stem) if stem.chars().count() >= 3 && !stem.ends_with('s') => stem.to_owned(),
            _ => word,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slug::Slug;

    fn role(slug: &str, title: &str, description: &str, skills: &[&str]) -> Role {
        Role {
            slug: Slug::parse(slug).unwrap(),
            title: title.to_owned(),
            description: description.to_owned(),
            instructions: String::new(),
            skills: skills.iter().map(|s| Slug::parse(s).unwrap()).collect(),
            limits: Vec::new(),
        }
    }

    fn roles() -> Vec<Role> {
        vec![
            role(
                "billing-admin",
                "Billing admin",
                "Credits, invoices and disputed charges.",
                &["billing-adjustments"],
            ),
            role(
                "tier-1-support",
                "Tier 1 support",
                "Answers customers and handles small refunds.",
                &["customer-lookup", "refund-handling"],
            ),
            role(
                "fleet-ops",
                "Fleet operations",
                "Schedules vehicle maintenance.",
                &["maintenance"],
            ),
        ]
    }

    #[test]
    fn the_role_whose_name_and_skills_match_the_task_comes_first() {
        let roles = roles();
        let refs: Vec<&Role> = roles.iter().collect();
        assert_eq!(
            matching_roles("Refund a customer's order after a lookup", &refs, 3),
            vec![1]
        );
        assert_eq!(
            matching_roles("Dispute on the invoice: billing credits", &refs, 3),
            vec![0]
        );
    }

    #[test]
    fn plural_and_case_do_not_matter_and_ties_keep_catalog_order() {
        let roles = roles();
        let refs: Vec<&Role> = roles.iter().collect();
        assert_eq!(matching_roles("CHARGES", &refs, 3), vec![0]);
        let twins = [
            role("a-desk", "A", "Handles refunds.", &[]),
            role("b-desk", "B", "Handles refunds.", &[]),
        ];
        let refs: Vec<&Role> = twins.iter().collect();
        assert_eq!(matching_roles("refund", &refs, 3), vec![0, 1]);
        assert_eq!(matching_roles("refund", &refs, 1), vec![0]);
    }

    #[test]
    fn a_task_sharing_no_word_with_any_role_matches_none() {
        let roles = roles();
        let refs: Vec<&Role> = roles.iter().collect();
        assert!(matching_roles("the and of", &refs, 3).is_empty());
        assert!(matching_roles("quantum chromodynamics", &refs, 3).is_empty());
    }
}
