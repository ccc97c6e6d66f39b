//! Export of a skill version as an Agent Skills folder in a tar archive:
//! `<skill>/SKILL.md`, `<skill>/references/<resource>.md` and a WikiSkill-style
//! `<skill>/provenance.json` (candidate, verdict, evidence digest, reviewer, file hashes).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::skill_md::SkillMd;
use crate::model::SkillVersion;
use crate::store::revisions::CandidateRecord;

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The files of the folder, path → content, in archive order.
pub fn skill_folder(
    version: &SkillVersion,
    candidate: Option<&CandidateRecord>,
) -> Vec<(String, Vec<u8>)> {
    let skill = &version.skill;
    let root = skill.slug.as_str();
    let mut files = vec![(
        format!("{root}/SKILL.md"),
        SkillMd::render(root, &skill.description, &skill.instructions).into_bytes(),
    )];
    for resource in &skill.resources {
        files.push((
            format!("{root}/references/{}.md", resource.name),
            format!("# {}\n\n{}\n", resource.title, resource.content).into_bytes(),
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
            },
        }
    }

    #[test]
    fn an_exported_folder_has_skill_md_references_and_provenance_with_hashes() {
        let files = skill_folder(&version(), None);
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
}
