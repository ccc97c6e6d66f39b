//! What the catalog's read-only server functions share (each feature's `read.rs`: roles,
//! skills, tools, scopes): paging, and on the server the indexes between entities.
//!
//! Every such function reads one in-memory `CompiledCatalog` snapshot (plus the agent-key list
//! for the scopes page) and checks the caller's console role first: any console role may
//! read. An unknown slug is `Ok(None)`; the page turns that into a 404 while rendering on
//! the server, because a 4xx response to a server-function call must carry an error body.

use serde::{Deserialize, Serialize};

/// Rows per page of every catalog list.
pub const PAGE_SIZE: usize = 100;

/// One page of a list; `page` is 1-based and always within `1..=pages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paged<T> {
    pub rows: Vec<T>,
    pub page: usize,
    pub pages: usize,
    pub total: usize,
}

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use std::collections::HashMap;

    use skillgate_core::model::Catalog;

    use super::{PAGE_SIZE, Paged};

    /// Page `page` (1-based, clamped into range) of `items`, mapping only the rows shown.
    pub fn page_of<S, T>(items: &[S], page: usize, row: impl FnMut(&S) -> T) -> Paged<T> {
        let total = items.len();
        let pages = total.div_ceil(PAGE_SIZE).max(1);
        let page = page.clamp(1, pages);
        Paged {
            rows: items
                .iter()
                .skip((page - 1) * PAGE_SIZE)
                .take(PAGE_SIZE)
                .map(row)
                .collect(),
            page,
            pages,
            total,
        }
    }

    pub fn lookup(index: &HashMap<&str, Vec<String>>, key: &str) -> Vec<String> {
        index.get(key).cloned().unwrap_or_default()
    }

    /// Role slug → the scopes that include it, in catalog order.
    pub fn scopes_by_role(catalog: &Catalog) -> HashMap<&str, Vec<String>> {
        let mut index: HashMap<&str, Vec<String>> = HashMap::new();
        for scope in &catalog.scopes {
            for role in &scope.roles {
                index
                    .entry(role.as_str())
                    .or_default()
                    .push(scope.slug.as_str().to_owned());
            }
        }
        index
    }

    /// Skill slug → the roles that include it, in catalog order.
    pub fn roles_by_skill(catalog: &Catalog) -> HashMap<&str, Vec<String>> {
        let mut index: HashMap<&str, Vec<String>> = HashMap::new();
        for role in &catalog.roles {
            for skill in &role.skills {
                index
                    .entry(skill.as_str())
                    .or_default()
                    .push(role.slug.as_str().to_owned());
            }
        }
        index
    }

    /// Tool name → the skills (current versions) that use it, in catalog order.
    pub fn skills_by_tool(catalog: &Catalog) -> HashMap<&str, Vec<String>> {
        let mut index: HashMap<&str, Vec<String>> = HashMap::new();
        for skill in &catalog.skills {
            for tool in &skill.skill.tools {
                index
                    .entry(tool.as_str())
                    .or_default()
                    .push(skill.skill.slug.as_str().to_owned());
            }
        }
        index
    }

    #[cfg(test)]
    mod tests {
        use super::{PAGE_SIZE, page_of};

        #[test]
        fn pages_hold_at_most_page_size_rows_and_out_of_range_pages_are_clamped() {
            let items: Vec<usize> = (0..PAGE_SIZE * 2 + 5).collect();
            let second = page_of(&items, 2, |i| *i);
            assert_eq!(
                (second.page, second.pages, second.total),
                (2, 3, items.len())
            );
            assert_eq!(second.rows.first(), Some(&PAGE_SIZE));
            assert_eq!(second.rows.len(), PAGE_SIZE);
            assert_eq!(page_of(&items, 99, |i| *i).rows.len(), 5);
            assert_eq!(page_of(&items, 0, |i| *i).page, 1);
            let empty = page_of(&Vec::<usize>::new(), 3, |i| *i);
            assert_eq!((empty.page, empty.pages, empty.rows.len()), (1, 1, 0));
        }
    }
}
