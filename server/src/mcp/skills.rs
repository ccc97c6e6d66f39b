//! The MCP Skills extension (SEP-2640) on the wire: the gateway's served skills
//! ([`skillgate_core::gateway::skills`]) as rmcp's skill, resource and directory results,
//! paged by URI.
//!
//! Every result is `cacheScope: private` (what a key sees depends on its scope) with a
//! short `ttlMs`, so a host picks up an approved revision or a scope change within a minute.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CacheScope, Cursor, DIRECTORY_MIME_TYPE, GetSkillResult, ListResourcesResult, ListSkillsResult,
    ReadResourceDirectoryResult, ReadResourceResult, Resource, ResourceContents, Skill,
    SkillFrontmatter, SkillResource, SkillResources,
};
use skillgate_core::gateway::skills::{DirectoryEntry, ServedSkill, SkillFile};

/// How long a host may treat a listing or a file as fresh.
pub const TTL_MS: u64 = 60_000;
/// Entries per `skills/list` and `resources/list` page.
pub const PAGE_SIZE: usize = 50;
const MARKDOWN: &str = "text/markdown";

/// One page of `items` (sorted by `key`), after the item the cursor names; the cursor of
/// the next page when more follow. A cursor is the hex of the last URI a page held, so a
/// page boundary stays put when the catalog changes between pages; anything else a client
/// sends as a cursor is `-32602`.
pub fn page<'a, T>(
    items: &'a [T],
    cursor: Option<&Cursor>,
    size: usize,
    key: impl Fn(&T) -> &str,
) -> Result<(&'a [T], Option<Cursor>), McpError> {
    let start = match cursor {
        None => 0,
        Some(cursor) => {
            let after = hex::decode(cursor)
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .ok_or_else(|| {
                    McpError::invalid_params(
                        "invalid cursor: pass the nextCursor of the previous page",
                        None,
                    )
                })?;
            items.partition_point(|item| key(item) <= after.as_str())
        }
    };
    let end = (start + size.max(1)).min(items.len());
    let page = &items[start..end];
    let next = (end < items.len())
        .then(|| page.last().map(|last| hex::encode(key(last))))
        .flatten();
    Ok((page, next))
}

/// The `skills/list` and `skills/get` entry: frontmatter as the file has it, and the
/// manifest of every file with its digest and size.
pub fn entry(served: &ServedSkill) -> Skill {
    let mut frontmatter = SkillFrontmatter::new(served.name(), served.description());
    for (key, value) in &served.frontmatter {
        if key != "name" && key != "description" {
            frontmatter.extra.insert(key.clone(), value.clone());
        }
    }
    let files = served
        .files
        .iter()
        .map(|file| SkillResource::new(&file.uri, file.digest(), file.size()))
        .collect();
    Skill::new(served.uri(), frontmatter, SkillResources::Files(files))
}

pub fn list_skills(
    skills: &[ServedSkill],
    cursor: Option<&Cursor>,
) -> Result<ListSkillsResult, McpError> {
    let (page, next) = page(skills, cursor, PAGE_SIZE, ServedSkill::uri)?;
    let mut result = ListSkillsResult::with_all_items(page.iter().map(entry).collect());
    result.next_cursor = next;
    result.ttl_ms = Some(TTL_MS);
    result.cache_scope = Some(CacheScope::Private);
    Ok(result)
}

pub fn get_skill(served: &ServedSkill) -> GetSkillResult {
    GetSkillResult::new(entry(served))
        .with_ttl_ms(TTL_MS)
        .with_cache_scope(CacheScope::Private)
}

/// `resources/list`: the `SKILL.md` of every skill, as the extension's hosts expect (the
/// other files are in each skill's manifest).
pub fn list_resources(
    skills: &[ServedSkill],
    cursor: Option<&Cursor>,
) -> Result<ListResourcesResult, McpError> {
    let (page, next) = page(skills, cursor, PAGE_SIZE, ServedSkill::uri)?;
    let resources = page
        .iter()
        .map(|served| {
            Resource::new(served.uri(), served.name())
                .with_description(served.description())
                .with_mime_type(MARKDOWN)
                .with_size(served.files[0].size())
        })
        .collect();
    let mut result = ListResourcesResult::with_all_items(resources);
    result.next_cursor = next;
    result.ttl_ms = Some(TTL_MS);
    result.cache_scope = Some(CacheScope::Private);
    Ok(result)
}

pub fn read_file(file: &SkillFile) -> ReadResourceResult {
    ReadResourceResult::new(vec![
        ResourceContents::text(&file.text, &file.uri).with_mime_type(MARKDOWN),
    ])
    .with_ttl_ms(TTL_MS)
    .with_cache_scope(CacheScope::Private)
}

pub fn read_directory(
    children: &[DirectoryEntry],
    cursor: Option<&Cursor>,
) -> Result<ReadResourceDirectoryResult, McpError> {
    let (page, next) = page(children, cursor, PAGE_SIZE, |child| child.uri.as_str())?;
    let resources = page
        .iter()
        .map(|child| {
            let resource = Resource::new(&child.uri, &child.name);
            match child.size {
                None => resource.with_mime_type(DIRECTORY_MIME_TYPE),
                Some(size) => resource.with_mime_type(MARKDOWN).with_size(size),
            }
        })
        .collect();
    let mut result = ReadResourceDirectoryResult::with_all_items(resources);
    result.next_cursor = next;
    result.ttl_ms = Some(TTL_MS);
    result.cache_scope = Some(CacheScope::Private);
    Ok(result)
}

/// The one answer to anything a key may not see or that does not exist, so a refusal
/// never says which: `-32602`, as the extension requires for an unknown skill.
pub fn unknown(uri: &str) -> McpError {
    let shown: String = uri.chars().take(200).collect();
    McpError::invalid_params(
        format!("no skill or skill file at {shown} for this key; skills/list lists them"),
        Some(serde_json::json!({ "uri": shown })),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uris(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("skill://r/s{i:03}/SKILL.md"))
            .collect()
    }

    #[test]
    fn pages_follow_each_other_without_gaps_or_repeats_and_end_without_a_cursor() {
        let items = uris(7);
        let mut seen = Vec::new();
        let mut cursor = None;
        let mut pages = 0;
        loop {
            let (page, next) = page(&items, cursor.as_ref(), 3, String::as_str).unwrap();
            seen.extend(page.iter().cloned());
            pages += 1;
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(pages, 3);
        assert_eq!(seen, items);
        let (all, next) = page(&items, None, 50, String::as_str).unwrap();
        assert_eq!((all.len(), next), (7, None));
    }

    #[test]
    fn a_cursor_that_is_not_one_of_ours_is_invalid_params() {
        let items = uris(3);
        for bad in ["zz", "not hex", "ff"] {
            let error = page(&items, Some(&bad.to_owned()), 2, String::as_str).unwrap_err();
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{bad}");
        }
    }

    #[test]
    fn a_page_boundary_holds_when_an_item_before_it_disappears() {
        let items = uris(6);
        let (_, next) = page(&items, None, 3, String::as_str).unwrap();
        let mut fewer = items.clone();
        fewer.remove(0);
        let (second, _) = page(&fewer, next.as_ref(), 3, String::as_str).unwrap();
        assert_eq!(second, &items[3..6]);
    }
}
