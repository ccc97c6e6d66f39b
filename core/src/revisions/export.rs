//! Export of a skill version as an Agent Skills folder, in a zip (the bundle format the
//! console and `skillgate skill import` read back) or a tar archive:
//! `<skill>/SKILL.md`, `<skill>/references/<resource>.md` and a WikiSkill-style
//! `<skill>/provenance.json` (candidate, verdict, evidence digest, reviewer, file hashes).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::bundle::render_reference;
use super::skill_md::skill_md_text;
use crate::model::SkillVersion;
use crate::store::revisions::CandidateRecord;

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The files of the folder, path → content, in archive order. `skill_md` is the file the
/// version was uploaded as, if it was (see [`skill_md_text`]).
pub fn skill_folder(
    version: &SkillVersion,
    candidate: Option<&CandidateRecord>,
    skill_md: Option<&str>,
) -> Vec<(String, Vec<u8>)> {
    let skill = &version.skill;
    let root = skill.slug.as_str();
    let mut files = vec![(
        format!("{root}/SKILL.md"),
        skill_md_text(skill, skill_md).into_bytes(),
    )];
    for resource in &skill.resources {
        files.push((
            format!("{root}/references/{}.md", resource.name),
            render_reference(resource).into_bytes(),
        ));
    }
    let hashes: BTreeMap<String, String> = files
        .iter()
        .map(|(path, bytes)| {
            (
                path.strip_prefix(&format!("{root}/"))
                    .unwrap_or(path)
                    .to_owned(),
                sha256(bytes),
            )
        })
        .collect();
    let candidate = candidate.map_or(Value::Null, |c| {
        json!({
            "id": c.id,
            "base_version": c.base_version,
            "proposer": {"kind": c.proposer.kind(), "name": c.proposer.name()},
            "note": c.note,
            "sources": c.sources,
            "verdict": c.verdict,
            "verdict_explanation": c.verdict_explanation,
            "evidence_sha256": sha256(c.evidence.to_string().as_bytes()),
            "reviewer": c.decided_by,
            "reason": c.reason,
            "decided_at": c.decided_at,
        })
    });
    let provenance = json!({
        "skill": root,
        "version": version.version,
        "candidate": candidate,
        "files_sha256": hashes,
    });
    files.push((
        format!("{root}/provenance.json"),
        serde_json::to_vec_pretty(&provenance).expect("provenance serializes"),
    ));
    files
}

/// The folder as an uncompressed tar archive.
pub fn tar_archive(files: &[(String, Vec<u8>)]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, path, bytes.as_slice())?;
    }
    builder.into_inner()
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use crate::model::{Resource, Skill};
    use crate::revisions::bundle::{Bundle, zip_archive};
    use crate::revisions::skill_md::SkillMd;
    use crate::slug::Slug;

    fn version() -> SkillVersion {
        SkillVersion {
            version: 3,
            skill: Skill {
                slug: Slug::parse("refund-handling").unwrap(),
                description: "Refunds within policy.".into(),
                instructions: "# Refunds\n\nCheck first.".into(),
                tools: vec!["process_refund".into()],
                resources: vec![Resource {
                    name: Slug::parse("refund-policy").unwrap(),
                    title: "Refund policy".into(),
                    content: "30 days.".into(),
                }],
                frontmatter_extra: Default::default(),
            },
        }
    }

    #[test]
    fn an_exported_folder_has_skill_md_references_and_provenance_with_hashes() {
        let files = skill_folder(&version(), None, None);
        let names: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "refund-handling/SKILL.md",
                "refund-handling/references/refund-policy.md",
                "refund-handling/provenance.json"
            ]
        );
        let md = String::from_utf8(files[0].1.clone()).unwrap();
        assert_eq!(
            SkillMd::parse(&md, "refund-handling").unwrap().instructions,
            "# Refunds\n\nCheck first."
        );
        let provenance: Value = serde_json::from_slice(&files[2].1).unwrap();
        assert_eq!(provenance["version"], 3);
        assert_eq!(provenance["files_sha256"]["SKILL.md"], sha256(&files[0].1));

        let archive = tar_archive(&files).unwrap();
        let mut read = tar::Archive::new(archive.as_slice());
        let mut paths = Vec::new();
        for entry in read.entries().unwrap() {
            let mut entry = entry.unwrap();
            let mut text = String::new();
            entry.read_to_string(&mut text).unwrap();
            paths.push((entry.path().unwrap().display().to_string(), text.len()));
        }
        assert_eq!(paths.len(), 3);
        assert_eq!(
            paths[0],
            ("refund-handling/SKILL.md".to_owned(), files[0].1.len())
        );
    }

    #[test]
    fn an_uploaded_skill_md_is_exported_byte_identical_and_references_read_back() {
        let uploaded = "---\nname: refund-handling\ndescription: 'Refunds within policy.'\nlicense: Apache-2.0\n---\n# Refunds\n\nCheck first.\n\n";
        let mut version = version();
        version.skill.frontmatter_extra = SkillMd::parse_any(uploaded).unwrap().extra;
        let files = skill_folder(&version, None, Some(uploaded));
        assert_eq!(files[0].1, uploaded.as_bytes());
        let zip = zip_archive(&files).unwrap();
        let bundle = Bundle::read("refund-handling-v3.zip", &zip).unwrap();
        assert_eq!(bundle.skill_md_text, uploaded);
        assert_eq!(
            bundle.resources.as_deref(),
            Some(&version.skill.resources[..])
        );
        let provenance: Value = serde_json::from_str(&bundle.provenance.unwrap().1).unwrap();
        assert_eq!(provenance["version"], 3);
    }

    #[test]
    fn a_skill_md_that_no_longer_describes_the_version_is_not_exported() {
        let uploaded = "---\nname: refund-handling\ndescription: Refunds within policy.\n---\n# Old instructions\n";
        let version = version();
        let files = skill_folder(&version, None, Some(uploaded));
        let md = String::from_utf8(files[0].1.clone()).unwrap();
        assert_ne!(md, uploaded);
        assert_eq!(md, SkillMd::render_skill(&version.skill));
    }
}
