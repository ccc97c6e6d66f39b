//! Agent Skills bundles: an uploaded file that is a `SKILL.md` or a zip of a skill folder
//! (`SKILL.md`, `references/*.md`, an optional WikiSkill `provenance.json`, at the zip's
//! top or in one top folder `<skill>/`), and a skill version written as that zip.
//!
//! Reading is pure and bounded: the upload's size, the number of entries, and the bytes
//! actually unpacked (not what the headers claim) are capped, so a zip bomb is refused
//! before it can fill memory. Every refusal names the file and what is wrong with it.

use std::collections::HashSet;
use std::io::{Cursor, Read, Write};

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

use super::skill_md::{MAX_SKILL_MD_BYTES, SkillMd, SkillMdError};
use crate::model::Resource;
use crate::slug::Slug;

/// The largest upload read, zip or `SKILL.md`.
pub const MAX_UPLOAD_BYTES: usize = 2 * 1024 * 1024;
/// The most entries (files and folders) a zip may hold.
pub const MAX_ENTRIES: usize = 128;
/// The most bytes all of a zip's files may unpack to together.
pub const MAX_UNPACKED_BYTES: u64 = 4 * 1024 * 1024;

const LAYOUT: &str = "a bundle holds SKILL.md, references/<name>.md and provenance.json";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    /// One file of the upload is wrong; `file` is its path as the uploader sees it.
    #[error("{file}: {message}")]
    File { file: String, message: String },
    /// The upload as a whole is unusable.
    #[error("{0}")]
    Upload(String),
}

fn file_error(file: &str, message: impl Into<String>) -> BundleError {
    BundleError::File {
        file: file.to_owned(),
        message: message.into(),
    }
}

/// A validated upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// Where `SKILL.md` was: the uploaded file's name, or its path inside the zip.
    pub skill_md_path: String,
    /// The `SKILL.md` exactly as uploaded.
    pub skill_md_text: String,
    pub skill_md: SkillMd,
    /// The files of a zip's `references/`, in archive order; `None` for a plain `SKILL.md`.
    pub resources: Option<Vec<Resource>>,
    /// `provenance.json`: its path inside the zip and its text.
    pub provenance: Option<(String, String)>,
}

impl Bundle {
    /// Reads an upload named `file_name`: a zip (by its signature) or a `SKILL.md`.
    pub fn read(file_name: &str, bytes: &[u8]) -> Result<Self, BundleError> {
        let file_name = match file_name.trim() {
            "" => "SKILL.md",
            name => name,
        };
        if bytes.len() > MAX_UPLOAD_BYTES {
            return Err(BundleError::Upload(format!(
                "{file_name}: the upload is {} bytes; at most {MAX_UPLOAD_BYTES} bytes are accepted",
                bytes.len()
            )));
        }
        if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
            return read_zip(file_name, bytes);
        }
        if file_name.to_ascii_lowercase().ends_with(".zip") {
            return Err(file_error(file_name, "is not a zip archive"));
        }
        if bytes.len() > MAX_SKILL_MD_BYTES {
            return Err(file_error(
                file_name,
                SkillMdError::TooLarge(bytes.len()).to_string(),
            ));
        }
        let text = utf8(file_name, bytes)?;
        let skill_md =
            SkillMd::parse_any(&text).map_err(|e| file_error(file_name, e.to_string()))?;
        Ok(Self {
            skill_md_path: file_name.to_owned(),
            skill_md_text: text,
            skill_md,
            resources: None,
            provenance: None,
        })
    }

    /// Refuses a bundle whose `SKILL.md` names a skill other than `expected`.
    pub fn check_skill(&self, expected: &str) -> Result<(), BundleError> {
        if self.skill_md.name.as_str() == expected {
            return Ok(());
        }
        Err(file_error(
            &self.skill_md_path,
            SkillMdError::WrongSkill {
                found: self.skill_md.name.to_string(),
                expected: expected.to_owned(),
            }
            .to_string(),
        ))
    }
}

fn utf8(file: &str, bytes: &[u8]) -> Result<String, BundleError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|e| file_error(file, format!("is not UTF-8 text ({e})")))
}

/// Refuses absolute paths, `..`, `.`, empty segments and backslashes: a bundle's paths
/// are plain relative names, whatever a later reader would make of them.
fn check_path(name: &str) -> Result<(), BundleError> {
    let inner = name.strip_suffix('/').unwrap_or(name);
    let bad = inner.is_empty()
        || inner.starts_with('/')
        || inner.contains('\\')
        || inner.contains(':')
        || inner.contains('\0')
        || inner
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..");
    if bad {
        return Err(file_error(
            name,
            "is not a plain relative path (absolute paths, `..`, `.`, drive letters and \
             backslashes are refused)",
        ));
    }
    Ok(())
}

fn read_zip(file_name: &str, bytes: &[u8]) -> Result<Bundle, BundleError> {
    let unreadable = |e: zip::result::ZipError| {
        BundleError::Upload(format!("{file_name}: {e}; nothing was read"))
    };
    // The directory's declared count is refused before the zip crate reads the directory.
    if let Some(declared) = declared_entries(bytes)
        && declared > MAX_ENTRIES
    {
        return Err(BundleError::Upload(format!(
            "{file_name}: the zip holds {declared} entries; at most {MAX_ENTRIES} are accepted"
        )));
    }
    let mut archive = ZipArchive::new(Cursor::new(bytes)).map_err(unreadable)?;
    // The zip crate indexes entries by name and keeps the last of two with the same name,
    // so a duplicate shows only as fewer entries than the archive's directory declares.
    match declared_entries(bytes) {
        Some(declared) if declared == archive.len() => {}
        Some(declared) if declared > archive.len() => {
            return Err(BundleError::Upload(format!(
                "{file_name}: a file appears twice in the zip (its directory lists {declared} \
                 entries under {} distinct paths); nothing was read",
                archive.len()
            )));
        }
        _ => {
            return Err(BundleError::Upload(format!(
                "{file_name}: the zip's directory cannot be checked (zip64 and multi-disk \
                 archives are not accepted for bundles); nothing was read"
            )));
        }
    }
    if archive.len() > MAX_ENTRIES {
        return Err(BundleError::Upload(format!(
            "{file_name}: the zip holds {} entries; at most {MAX_ENTRIES} are accepted",
            archive.len()
        )));
    }
    let mut seen = HashSet::new();
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut top_level: Vec<String> = Vec::new();
    let mut unpacked: u64 = 0;
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(unreadable)?;
        let name = entry.name().to_owned();
        check_path(&name)?;
        if entry.is_symlink() {
            return Err(file_error(
                &name,
                "is a symbolic link; a bundle holds plain files only",
            ));
        }
        let top = name.split('/').next().unwrap_or_default().to_owned();
        let top = if name.contains('/') {
            format!("{top}/")
        } else {
            top
        };
        if !top_level.contains(&top) {
            top_level.push(top);
        }
        if entry.is_dir() {
            continue;
        }
        if !seen.insert(name.clone()) {
            return Err(file_error(&name, "appears twice in the zip"));
        }
        let room = MAX_UNPACKED_BYTES - unpacked;
        // A SKILL.md has its own, smaller limit, checked on the bytes unpacked too.
        let skill_md_limit = (name.rsplit('/').next() == Some("SKILL.md"))
            .then_some(MAX_SKILL_MD_BYTES as u64)
            .filter(|limit| *limit < room);
        let mut content = Vec::new();
        (&mut entry)
            .take(skill_md_limit.unwrap_or(room) + 1)
            .read_to_end(&mut content)
            .map_err(|e| file_error(&name, format!("cannot be unpacked ({e})")))?;
        if let Some(limit) = skill_md_limit
            && content.len() as u64 > limit
        {
            return Err(file_error(
                &name,
                format!(
                    "unpacks to more than {MAX_SKILL_MD_BYTES} bytes; a SKILL.md may be at most \
                     {MAX_SKILL_MD_BYTES} bytes (256 KiB)"
                ),
            ));
        }
        if content.len() as u64 > room {
            return Err(BundleError::Upload(format!(
                "{file_name}: the zip unpacks to more than {MAX_UNPACKED_BYTES} bytes; nothing was read"
            )));
        }
        unpacked += content.len() as u64;
        files.push((name, content));
    }
    let prefix = if seen.contains("SKILL.md") {
        String::new()
    } else {
        match top_level.as_slice() {
            [only] if only == "references/" => {
                return Err(file_error("SKILL.md", format!("is missing; {LAYOUT}")));
            }
            [only] if only.ends_with('/') => {
                let missing = format!("{only}SKILL.md");
                if !seen.contains(&missing) {
                    return Err(file_error(&missing, format!("is missing; {LAYOUT}")));
                }
                only.clone()
            }
            [] => {
                return Err(BundleError::Upload(format!(
                    "{file_name}: the zip is empty; {LAYOUT}"
                )));
            }
            many => {
                return Err(BundleError::Upload(format!(
                    "{file_name}: no SKILL.md at the top of the zip or in one top folder \
                     `<skill>/` (the zip's top holds {})",
                    many.join(", ")
                )));
            }
        }
    };
    folder(&prefix, files)
}

/// The entry count that the end-of-central-directory record declares (`None` when there is
/// no such record, or it defers to zip64).
fn declared_entries(bytes: &[u8]) -> Option<usize> {
    const RECORD: usize = 22;
    let earliest = bytes.len().saturating_sub(RECORD + usize::from(u16::MAX));
    let at = (earliest..=bytes.len().checked_sub(RECORD)?)
        .rev()
        .find(|&i| bytes[i..].starts_with(b"PK\x05\x06"))?;
    let count = u16::from_le_bytes([bytes[at + 10], bytes[at + 11]]);
    (count != u16::MAX).then_some(usize::from(count))
}

/// The files of a skill folder whose paths start with `prefix` (`""` or `<skill>/`).
fn folder(prefix: &str, files: Vec<(String, Vec<u8>)>) -> Result<Bundle, BundleError> {
    let mut skill_md = None;
    let mut provenance = None;
    let mut resources: Vec<Resource> = Vec::new();
    let mut unknown = Vec::new();
    for (path, content) in files {
        let Some(inside) = path.strip_prefix(prefix) else {
            unknown.push(path);
            continue;
        };
        match inside {
            "SKILL.md" => skill_md = Some((path.clone(), utf8(&path, &content)?)),
            "provenance.json" => provenance = Some((path.clone(), utf8(&path, &content)?)),
            _ => match inside.strip_prefix("references/") {
                Some(file) => {
                    let Some(stem) = file.strip_suffix(".md").filter(|s| !s.contains('/')) else {
                        return Err(file_error(
                            &path,
                            "is not a reference: references are markdown files \
                             (`<name>.md`) directly in references/",
                        ));
                    };
                    let name = Slug::parse(stem).map_err(|_| {
                        file_error(
                            &path,
                            format!(
                                "resource name must be 1–64 lowercase letters, digits and \
                                 single hyphens (`{stem}` is not)"
                            ),
                        )
                    })?;
                    if resources.iter().any(|r| r.name == name) {
                        return Err(file_error(&path, "appears twice in the zip"));
                    }
                    let text = utf8(&path, &content)?;
                    let resource = parse_reference(name, &text);
                    if resource.content.trim().is_empty() {
                        return Err(file_error(&path, "has no content after its heading"));
                    }
                    resources.push(resource);
                }
                None => unknown.push(path),
            },
        }
    }
    if !unknown.is_empty() {
        return Err(BundleError::Upload(format!(
            "unknown files in the zip: {} ({LAYOUT}; nothing else)",
            unknown.join(", ")
        )));
    }
    let (skill_md_path, skill_md_text) =
        skill_md.ok_or_else(|| file_error(&format!("{prefix}SKILL.md"), "is missing"))?;
    let parsed = SkillMd::parse_any(&skill_md_text)
        .map_err(|e| file_error(&skill_md_path, e.to_string()))?;
    if let Some(folder) = prefix.strip_suffix('/')
        && parsed.name.as_str() != folder
    {
        return Err(file_error(
            &skill_md_path,
            format!(
                "frontmatter name is `{}` but its folder is `{folder}`; they must match",
                parsed.name
            ),
        ));
    }
    Ok(Bundle {
        skill_md_path,
        skill_md_text,
        skill_md: parsed,
        resources: Some(resources),
        provenance,
    })
}

/// A reference file as a resource: the title from a leading `# ` heading (else the name),
/// the content after it. The inverse of [`render_reference`].
pub fn parse_reference(name: Slug, text: &str) -> Resource {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text.strip_prefix("# ") else {
        return Resource {
            title: name.to_string(),
            name,
            content: text.trim_end().to_owned(),
        };
    };
    let (title, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let body = body.strip_prefix('\n').unwrap_or(body);
    let body = body.strip_suffix('\n').unwrap_or(body);
    let title = title.trim();
    Resource {
        title: if title.is_empty() {
            name.to_string()
        } else {
            title.to_owned()
        },
        name,
        content: body.to_owned(),
    }
}

/// A resource as the markdown file `references/<name>.md`.
pub fn render_reference(resource: &Resource) -> String {
    format!("# {}\n\n{}\n", resource.title, resource.content)
}

/// Files (path → content) as a deflated zip. Entries carry no timestamps (the zip
/// format's 1980 epoch) and mode 0644, so the same files always give the same bytes.
pub fn zip_archive(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, zip::result::ZipError> {
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    for (path, bytes) in files {
        writer.start_file(path.as_str(), options)?;
        writer.write_all(bytes)?;
    }
    Ok(writer.finish()?.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKILL_MD: &str = "---\nname: refund-handling\ndescription: Issue refunds within policy.\nlicense: Apache-2.0\nmetadata:\n  author: support-team\nallowed-tools: process_refund\n---\n\n# Refunds\n\nCheck eligibility first.\n";
    const POLICY: &str = "# Refund policy\n\nRefunds within 30 days.\n";

    fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let files: Vec<(String, Vec<u8>)> = files
            .iter()
            .map(|(p, b)| ((*p).to_owned(), b.to_vec()))
            .collect();
        zip_archive(&files).unwrap()
    }

    /// Rewrites every occurrence of a path in the archive's headers: how a test makes the
    /// entries the zip writer itself refuses to write (duplicates, `..`).
    fn rename(mut zip: Vec<u8>, from: &str, to: &str) -> Vec<u8> {
        assert_eq!(from.len(), to.len());
        let (from, to) = (from.as_bytes(), to.as_bytes());
        let mut i = 0;
        let mut replaced = 0;
        while i + from.len() <= zip.len() {
            if &zip[i..i + from.len()] == from {
                zip[i..i + from.len()].copy_from_slice(to);
                replaced += 1;
            }
            i += 1;
        }
        assert_eq!(replaced, 2, "a local and a central header");
        zip
    }

    fn refusal(bytes: &[u8]) -> String {
        Bundle::read("bundle.zip", bytes).unwrap_err().to_string()
    }

    #[test]
    fn a_zip_with_a_top_folder_gives_the_skill_md_verbatim_and_its_references_as_resources() {
        let zip = zip_of(&[
            ("refund-handling/SKILL.md", SKILL_MD.as_bytes()),
            (
                "refund-handling/references/refund-policy.md",
                POLICY.as_bytes(),
            ),
            (
                "refund-handling/provenance.json",
                b"{\"note\": \"from eval\"}",
            ),
        ]);
        let bundle = Bundle::read("refund-handling.zip", &zip).unwrap();
        assert_eq!(bundle.skill_md_text, SKILL_MD);
        assert_eq!(bundle.skill_md.name.as_str(), "refund-handling");
        assert_eq!(
            bundle.skill_md.extra.get("allowed-tools"),
            Some(&serde_json::json!("process_refund"))
        );
        assert_eq!(
            bundle.resources,
            Some(vec![Resource {
                name: Slug::parse("refund-policy").unwrap(),
                title: "Refund policy".into(),
                content: "Refunds within 30 days.".into(),
            }])
        );
        assert_eq!(
            bundle.provenance,
            Some((
                "refund-handling/provenance.json".into(),
                "{\"note\": \"from eval\"}".into()
            ))
        );
        bundle.check_skill("refund-handling").unwrap();
        assert_eq!(
            bundle
                .check_skill("customer-lookup")
                .unwrap_err()
                .to_string(),
            "refund-handling/SKILL.md: frontmatter name is `refund-handling` but this is skill `customer-lookup`"
        );
    }

    #[test]
    fn a_zip_with_the_folder_at_its_top_and_folder_entries_is_read_too() {
        let zip = {
            let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
            let options = SimpleFileOptions::default();
            writer.add_directory("references/", options).unwrap();
            writer.start_file("SKILL.md", options).unwrap();
            writer.write_all(SKILL_MD.as_bytes()).unwrap();
            writer
                .start_file("references/refund-policy.md", options)
                .unwrap();
            writer.write_all(b"No heading here.\n").unwrap();
            writer.finish().unwrap().into_inner()
        };
        let bundle = Bundle::read("x.zip", &zip).unwrap();
        assert_eq!(bundle.skill_md_path, "SKILL.md");
        let resources = bundle.resources.unwrap();
        assert_eq!(
            (resources[0].title.as_str(), resources[0].content.as_str()),
            ("refund-policy", "No heading here.")
        );
        assert_eq!(bundle.provenance, None);
    }

    #[test]
    fn a_plain_skill_md_upload_keeps_the_base_resources() {
        let bundle = Bundle::read("SKILL.md", SKILL_MD.as_bytes()).unwrap();
        assert_eq!(bundle.skill_md_text, SKILL_MD);
        assert_eq!(bundle.resources, None);
        let err = Bundle::read(
            "SKILL.md",
            b"---\nname: refund-handling\ndescription: \"\"\n---\nx",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "SKILL.md: frontmatter description must be 1–1024 characters (it has 0)"
        );
    }

    #[test]
    fn an_invalid_skill_md_inside_a_zip_is_named_by_its_path_and_field() {
        let bad = SKILL_MD.replace("Issue refunds within policy.", &"x".repeat(1025));
        let zip = zip_of(&[("refund-handling/SKILL.md", bad.as_bytes())]);
        assert_eq!(
            refusal(&zip),
            "refund-handling/SKILL.md: frontmatter description must be 1–1024 characters (it has 1025)"
        );
        let zip = zip_of(&[("other-name/SKILL.md", SKILL_MD.as_bytes())]);
        assert_eq!(
            refusal(&zip),
            "other-name/SKILL.md: frontmatter name is `refund-handling` but its folder is `other-name`; they must match"
        );
    }

    #[test]
    fn a_reference_whose_file_name_is_not_a_resource_name_is_refused_by_name() {
        let zip = zip_of(&[
            ("SKILL.md", SKILL_MD.as_bytes()),
            ("references/Policy Doc.md", POLICY.as_bytes()),
        ]);
        assert_eq!(
            refusal(&zip),
            "references/Policy Doc.md: resource name must be 1–64 lowercase letters, digits and single hyphens (`Policy Doc` is not)"
        );
        let zip = zip_of(&[
            ("SKILL.md", SKILL_MD.as_bytes()),
            ("references/table.csv", b"a,b"),
        ]);
        assert!(refusal(&zip).starts_with("references/table.csv: is not a reference"));
    }

    #[test]
    fn unknown_files_are_refused_and_named() {
        let zip = zip_of(&[
            ("refund-handling/SKILL.md", SKILL_MD.as_bytes()),
            ("refund-handling/scripts/run.sh", b"rm -rf /"),
            ("refund-handling/notes.txt", b"hi"),
        ]);
        assert_eq!(
            refusal(&zip),
            "unknown files in the zip: refund-handling/scripts/run.sh, refund-handling/notes.txt (a bundle holds SKILL.md, references/<name>.md and provenance.json; nothing else)"
        );
        let zip = zip_of(&[
            ("refund-handling/SKILL.md", SKILL_MD.as_bytes()),
            ("README.md", b"hi"),
        ]);
        assert!(
            refusal(&zip).contains("the zip's top holds refund-handling/, README.md"),
            "{}",
            refusal(&zip)
        );
    }

    #[test]
    fn a_zip_without_skill_md_is_refused() {
        let zip = zip_of(&[("references/refund-policy.md", POLICY.as_bytes())]);
        assert_eq!(
            refusal(&zip),
            "SKILL.md: is missing; a bundle holds SKILL.md, references/<name>.md and provenance.json"
        );
        let zip = zip_of(&[(
            "refund-handling/references/refund-policy.md",
            POLICY.as_bytes(),
        )]);
        assert!(refusal(&zip).starts_with("refund-handling/SKILL.md: is missing"));
        assert!(refusal(&zip_of(&[])).contains("the zip is empty"));
    }

    #[test]
    fn parent_and_absolute_paths_are_refused() {
        let zip = zip_of(&[("SKILL.md", SKILL_MD.as_bytes()), ("xx/evil.md", b"x")]);
        for (to, shown) in [("../evil.md", "../evil.md"), ("/x/evil.md", "/x/evil.md")] {
            let zip = rename(zip.clone(), "xx/evil.md", to);
            assert_eq!(
                refusal(&zip),
                format!(
                    "{shown}: is not a plain relative path (absolute paths, `..`, `.`, drive letters and backslashes are refused)"
                )
            );
        }
        let zip = rename(zip, "xx/evil.md", "xx\\evil.md");
        assert!(refusal(&zip).starts_with("xx\\evil.md: is not a plain relative path"));
    }

    #[test]
    fn symbolic_links_are_refused() {
        let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
        let options = SimpleFileOptions::default();
        writer.start_file("SKILL.md", options).unwrap();
        writer.write_all(SKILL_MD.as_bytes()).unwrap();
        writer
            .add_symlink("references/passwd.md", "/etc/passwd", options)
            .unwrap();
        let zip = writer.finish().unwrap().into_inner();
        assert_eq!(
            refusal(&zip),
            "references/passwd.md: is a symbolic link; a bundle holds plain files only"
        );
    }

    #[test]
    fn a_file_that_appears_twice_is_refused() {
        let zip = zip_of(&[
            ("SKILL.md", SKILL_MD.as_bytes()),
            ("SKILL.mX", SKILL_MD.as_bytes()),
        ]);
        let zip = rename(zip, "SKILL.mX", "SKILL.md");
        assert_eq!(
            refusal(&zip),
            "bundle.zip: a file appears twice in the zip (its directory lists 2 entries under 1 distinct paths); nothing was read"
        );
        let zip = zip_of(&[
            ("SKILL.md", SKILL_MD.as_bytes()),
            ("references/a.md", b"x"),
            ("references/b.md", b"x"),
        ]);
        let zip = rename(zip, "references/b.md", "references/a.md");
        assert!(refusal(&zip).contains("a file appears twice"));
    }

    #[test]
    fn markdown_that_is_not_utf8_is_refused() {
        let zip = zip_of(&[
            ("SKILL.md", SKILL_MD.as_bytes()),
            ("references/refund-policy.md", b"# Policy\n\n\xff\xfe"),
        ]);
        assert!(
            refusal(&zip).starts_with("references/refund-policy.md: is not UTF-8 text"),
            "{}",
            refusal(&zip)
        );
        let err = Bundle::read("SKILL.md", b"---\xff")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("SKILL.md: is not UTF-8 text"), "{err}");
    }

    #[test]
    fn a_zip_bomb_is_refused_by_the_bytes_it_unpacks_to() {
        let zeros = vec![0u8; (MAX_UNPACKED_BYTES + 1) as usize];
        let zip = zip_of(&[
            ("SKILL.md", SKILL_MD.as_bytes()),
            ("references/a.md", &zeros),
        ]);
        assert!(
            zip.len() < 64 * 1024,
            "deflate squeezes zeros: {}",
            zip.len()
        );
        assert_eq!(
            refusal(&zip),
            format!(
                "bundle.zip: the zip unpacks to more than {MAX_UNPACKED_BYTES} bytes; nothing was read"
            )
        );
    }

    #[test]
    fn a_zip_whose_headers_understate_its_sizes_is_still_refused() {
        let zeros = vec![0u8; (MAX_UNPACKED_BYTES + 1) as usize];
        let mut zip = zip_of(&[
            ("references/a.md", &zeros),
            ("SKILL.md", SKILL_MD.as_bytes()),
        ]);
        // The first local header's uncompressed size (offset 22) and the central
        // directory's (offset 24 of its first entry) claim 100 bytes.
        zip[22..26].copy_from_slice(&100u32.to_le_bytes());
        let central = zip.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
        zip[central + 24..central + 28].copy_from_slice(&100u32.to_le_bytes());
        assert!(Bundle::read("bundle.zip", &zip).is_err());
    }

    #[test]
    fn too_many_entries_or_too_large_an_upload_is_refused() {
        let names: Vec<String> = (0..=MAX_ENTRIES)
            .map(|i| format!("references/r{i}.md"))
            .collect();
        let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"x"[..])).collect();
        assert!(refusal(&zip_of(&files)).contains(&format!("at most {MAX_ENTRIES} are accepted")));
        let big = vec![b'a'; MAX_UPLOAD_BYTES + 1];
        assert!(
            Bundle::read("SKILL.md", &big)
                .unwrap_err()
                .to_string()
                .contains("at most 2097152 bytes are accepted")
        );
        assert_eq!(
            Bundle::read("skill.zip", b"not a zip")
                .unwrap_err()
                .to_string(),
            "skill.zip: is not a zip archive"
        );
    }

    #[test]
    fn a_skill_md_over_its_limit_is_refused_before_it_is_parsed_plain_or_zipped() {
        let big = format!("{SKILL_MD}{}", "y".repeat(MAX_SKILL_MD_BYTES));
        let err = Bundle::read("SKILL.md", big.as_bytes())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "SKILL.md: is {} bytes; a SKILL.md may be at most 262144 bytes (256 KiB)",
                big.len()
            )
        );
        let zip = zip_of(&[("refund-handling/SKILL.md", big.as_bytes())]);
        assert_eq!(
            refusal(&zip),
            "refund-handling/SKILL.md: unpacks to more than 262144 bytes; a SKILL.md may be at \
             most 262144 bytes (256 KiB)"
        );
    }

    #[test]
    fn a_rendered_reference_parses_back_to_the_same_resource() {
        let resource = Resource {
            name: Slug::parse("refund-policy").unwrap(),
            title: "Refund policy".into(),
            content: "Line one.\n\n  Line two, indented.".into(),
        };
        let text = render_reference(&resource);
        assert_eq!(parse_reference(resource.name.clone(), &text), resource);
    }

    #[test]
    fn the_same_files_always_zip_to_the_same_bytes() {
        let files = [("SKILL.md", SKILL_MD.as_bytes())];
        assert_eq!(zip_of(&files), zip_of(&files));
    }
}
