//! The catalog document's checks and plans against the demo catalog, without a database.

use chrono::Utc;

use super::document::CatalogDocument;
use super::export::document;
use super::plan::{Action, EntityKind, Plan, plan};
use super::validate::{Issue, parse, resolve};
use crate::model::{Upstream, UpstreamKind};
use crate::slug::Slug;
use crate::store::catalog_code::{CatalogState, StoredKey};

fn demo_state() -> CatalogState {
    let upstream = Upstream {
        name: Slug::parse("demo").unwrap(),
        kind: UpstreamKind::Stdio {
            command: "/usr/bin/skillgate".into(),
            args: vec!["demo-upstream".into()],
        },
    };
    CatalogState {
        catalog: crate::demo::catalog::demo_catalog().into_catalog(vec![upstream]),
        unadmitted: Default::default(),
        keys: vec![StoredKey {
            name: "support-bot".into(),
            scope: "support".into(),
            prefix: "sgk_AbCd1234".into(),
            expires_at: None,
            revoked_at: None,
        }],
    }
}

fn demo_yaml() -> String {
    document(&demo_state(), Utc::now()).to_yaml()
}

fn plan_of(state: &CatalogState, yaml: &str, prune: bool) -> Result<Plan, Vec<Issue>> {
    let doc = parse(yaml.as_bytes())?;
    let desired = resolve(state, &doc, prune, Utc::now())?;
    Ok(plan(state, &desired, prune, Utc::now()))
}

fn paths(issues: &[Issue]) -> Vec<&str> {
    issues.iter().map(|i| i.path.as_str()).collect()
}

#[test]
fn the_exported_demo_reads_back_as_the_same_document_and_plans_no_change() {
    let yaml = demo_yaml();
    let doc: CatalogDocument = parse(yaml.as_bytes()).unwrap();
    assert_eq!(doc, document(&demo_state(), Utc::now()));
    assert_eq!(doc.to_yaml(), yaml, "writing is deterministic");
    let plan = plan_of(&demo_state(), &yaml, true).unwrap();
    assert!(plan.is_empty(), "{plan}");
    assert_eq!(plan.to_string(), "no changes\n");
    // Diff-friendly: multi-line instructions are block scalars, no secrets, no versions.
    assert!(yaml.contains("instructions: |"), "{yaml}");
    assert!(
        !yaml.contains("version: 2") && !yaml.contains("sgk_"),
        "{yaml}"
    );
    assert!(
        !yaml.contains("name: curation\n  transport"),
        "the built-in upstream is not exported"
    );
}

#[test]
fn a_changed_limit_plans_a_change_of_that_role_naming_the_limit_and_its_old_and_new_value() {
    let yaml = demo_yaml().replacen("max: 1000", "max: 900", 1);
    let plan = plan_of(&demo_state(), &yaml, false).unwrap();
    assert_eq!(plan.changes.len(), 1, "{plan}");
    let change = &plan.changes[0];
    assert_eq!(
        (change.kind, change.action, change.name.as_str()),
        (EntityKind::Role, Action::Change, "tier-1-support")
    );
    assert_eq!(change.fields, ["limits[1]"], "{plan}");
    assert_eq!(change.audit_action(), "role.update");
    assert_eq!(change.target(), "role:tier-1-support");
    assert_eq!(
        plan.to_string(),
        "~ role tier-1-support: limits[1]\n    limits[1].max: 1000 → 900\n\
         0 to create, 1 to change, 0 to remove\n"
    );
    let json = plan.to_json();
    assert_eq!(json["change"], 1);
    assert_eq!(
        json["changes"][0]["details"],
        serde_json::json!([{"path": "limits[1].max", "before": 1000, "after": 900}])
    );
    assert_eq!(json["changes"][0]["action"], "change");
    assert_eq!(json["changes"][0]["kind"], "role");
}

#[test]
fn a_plan_shows_each_value_a_change_sets_lists_whole_and_long_texts_by_their_difference() {
    let mut doc = document(&demo_state(), Utc::now());
    let tier1 = doc
        .roles
        .iter()
        .position(|r| r.slug.as_str() == "tier-1-support")
        .unwrap();
    let instructions = doc.roles[tier1].instructions.clone();
    doc.roles[tier1].instructions = instructions.replace("one ticket per case", "one ticket");
    let support = doc
        .scopes
        .iter()
        .position(|s| s.slug.as_str() == "support")
        .unwrap();
    let dropped = doc.scopes[support].roles.pop().unwrap();
    let plan = plan_of(&demo_state(), &doc.to_yaml(), false).unwrap();
    let text = plan.to_string();
    let role_details: Vec<String> = plan
        .changes
        .iter()
        .find(|c| c.name == "tier-1-support")
        .unwrap()
        .details
        .iter()
        .map(ToString::to_string)
        .collect();
    let [instructions_line] = role_details.try_into().unwrap();
    assert!(
        instructions_line.starts_with("instructions: …\""),
        "{instructions_line}"
    );
    assert!(
        instructions_line.contains("one ticket per case")
            && instructions_line.contains(&format!("({} characters)", instructions.len())),
        "{instructions_line}"
    );
    let scope = plan.changes.iter().find(|c| c.name == "support").unwrap();
    assert_eq!(scope.details.len(), 1, "{text}");
    assert_eq!(scope.details[0].path, "roles");
    let after = scope.details[0].after.as_ref().unwrap().as_array().unwrap();
    assert!(
        !after.contains(&serde_json::json!(dropped.as_str())),
        "{text}"
    );
    assert!(text.contains("\n    roles: ["), "{text}");
}

#[test]
fn an_invalid_file_reports_every_problem_by_its_path() {
    let mut doc = document(&demo_state(), Utc::now());
    doc.skills[0].tools.push("no_such_tool".into());
    doc.roles[1]
        .skills
        .push(Slug::parse("no-such-skill").unwrap());
    let dup = doc.scopes[0].clone();
    doc.scopes.push(dup);
    let yaml = doc.to_yaml();
    let issues = plan_of(&demo_state(), &yaml, false).unwrap_err();
    let found = paths(&issues);
    let n = doc.skills[0].tools.len() - 1;
    let m = doc.roles[1].skills.len() - 1;
    let last = doc.scopes.len() - 1;
    assert!(
        found.contains(&format!("skills[0].tools[{n}]").as_str()),
        "{issues:?}"
    );
    assert!(
        found.contains(&format!("roles[1].skills[{m}]").as_str()),
        "{issues:?}"
    );
    assert!(
        found.contains(&format!("scopes[{last}].slug").as_str()),
        "{issues:?}"
    );
}

#[test]
fn a_limit_on_an_argument_the_tool_lacks_and_a_guardrail_on_an_unknown_tool_are_named() {
    let doc = document(&demo_state(), Utc::now());
    let (i, j) = doc
        .roles
        .iter()
        .enumerate()
        .find_map(|(i, r)| {
            r.limits
                .iter()
                .position(|l| l.arg.is_some())
                .map(|j| (i, j))
        })
        .unwrap();
    let mut doc = doc;
    doc.roles[i].limits[j].arg = Some("no_such_arg".into());
    let s = doc
        .scopes
        .iter()
        .position(|s| !s.guardrails.is_empty())
        .unwrap();
    doc.scopes[s].guardrails[0].tool = "no_such_tool".into();
    let issues = plan_of(&demo_state(), &doc.to_yaml(), false).unwrap_err();
    let found = paths(&issues);
    assert!(
        found.contains(&format!("roles[{i}].limits[{j}].arg").as_str()),
        "{issues:?}"
    );
    assert!(
        found.contains(&format!("scopes[{s}].guardrails[0].tool").as_str()),
        "{issues:?}"
    );
}

#[test]
fn a_parse_error_names_the_field_and_unknown_fields_are_refused() {
    let yaml = demo_yaml().replacen("max: 1000", "max: lots", 1);
    let issues = plan_of(&demo_state(), &yaml, false).unwrap_err();
    assert_eq!(issues.len(), 1);
    assert!(
        issues[0].path.starts_with("roles[") && issues[0].path.ends_with(".max"),
        "{issues:?}"
    );
    let yaml = demo_yaml().replacen("title:", "titel: x\n  title:", 1);
    let issues = plan_of(&demo_state(), &yaml, false).unwrap_err();
    assert!(
        issues[0].message.contains("unknown field `titel`"),
        "{issues:?}"
    );
    let issues = plan_of(&demo_state(), "version: 2\n", false).unwrap_err();
    assert_eq!(paths(&issues), ["version"]);
}

#[test]
fn entities_missing_from_the_file_are_removed_only_with_prune() {
    let mut doc = document(&demo_state(), Utc::now());
    doc.keys.clear();
    let kept = doc.scopes.remove(0).slug;
    let yaml = doc.to_yaml();
    assert!(plan_of(&demo_state(), &yaml, false).unwrap().is_empty());
    let plan = plan_of(&demo_state(), &yaml, true).unwrap();
    let removed: Vec<(EntityKind, &str)> = plan
        .changes
        .iter()
        .filter(|c| c.action == Action::Remove)
        .map(|c| (c.kind, c.name.as_str()))
        .collect();
    assert_eq!(
        removed,
        [
            (EntityKind::Scope, kept.as_str()),
            (EntityKind::AgentKey, "support-bot")
        ],
        "{plan}"
    );
    assert_eq!(plan.changes[1].audit_action(), "agent_key.revoke");
}

#[test]
fn pruning_a_skill_a_kept_role_uses_is_refused_naming_the_reference() {
    let mut doc = document(&demo_state(), Utc::now());
    let used = doc.roles[0].skills[0].clone();
    doc.skills.retain(|s| s.slug != used);
    let issues = plan_of(&demo_state(), &doc.to_yaml(), true).unwrap_err();
    let issue = issues
        .iter()
        .find(|i| i.path == "roles[0].skills[0]")
        .unwrap_or_else(|| panic!("{issues:?}"));
    assert!(issue.message.contains("--prune would remove it"), "{issue}");
}

#[test]
fn a_key_cannot_change_scope_in_place() {
    let mut doc = document(&demo_state(), Utc::now());
    doc.keys[0].scope = doc
        .scopes
        .iter()
        .find(|s| s.slug.as_str() != "support")
        .unwrap()
        .slug
        .clone();
    let issues = plan_of(&demo_state(), &doc.to_yaml(), false).unwrap_err();
    assert_eq!(paths(&issues), ["keys[0].scope"]);
    assert!(issues[0].message.contains("cannot change"), "{issues:?}");
}

#[test]
fn a_changed_definition_needs_its_new_pin() {
    let mut doc = document(&demo_state(), Utc::now());
    doc.tools[0].description.push_str(" Now with more.");
    let issues = plan_of(&demo_state(), &doc.to_yaml(), false).unwrap_err();
    assert_eq!(paths(&issues), ["tools[0].pin"]);
    doc.tools[0].pin = Some(doc.tools[0].spec().pin());
    let plan = plan_of(&demo_state(), &doc.to_yaml(), false).unwrap();
    assert_eq!(plan.changes[0].fields, ["description"], "{plan}");
}

#[test]
fn the_committed_json_schema_is_the_generated_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/catalog.schema.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == super::json_schema_text(),
        "docs/catalog.schema.json is stale: run `skillgate catalog schema > docs/catalog.schema.json`"
    );
}

#[test]
fn each_limit_error_names_the_field_it_is_about() {
    let doc = document(&demo_state(), Utc::now());
    let tier1 = doc
        .roles
        .iter()
        .position(|r| r.slug.as_str() == "tier-1-support")
        .unwrap();
    let limits = &doc.roles[tier1].limits;
    let find =
        |kind: super::document::LimitKind| limits.iter().position(|l| l.kind == kind).unwrap();
    use super::document::LimitKind::*;
    let (sum, requires, approval) = (find(SumCap), find(Requires), find(RequiresApproval));
    let mut doc = doc;
    let role = &mut doc.roles[tier1];
    role.limits[sum].max = Some("-1".parse().unwrap());
    role.limits[requires].after = Some(vec!["no_such_tool".into()]);
    role.limits[requires].result.as_mut().unwrap().pointer = "eligible".into();
    role.limits[approval].expires_in_minutes = Some(0);
    let issues = plan_of(&demo_state(), &doc.to_yaml(), false).unwrap_err();
    let base = format!("roles[{tier1}].limits");
    assert_eq!(
        paths(&issues),
        [
            format!("{base}[{sum}].max"),
            format!("{base}[{requires}].after[0]"),
            format!("{base}[{approval}].expires_in_minutes"),
        ],
        "{issues:?}"
    );
    let mut doc = document(&demo_state(), Utc::now());
    doc.roles[tier1].limits[requires]
        .result
        .as_mut()
        .unwrap()
        .pointer = "eligible".into();
    let issues = plan_of(&demo_state(), &doc.to_yaml(), false).unwrap_err();
    assert_eq!(
        paths(&issues),
        [format!("{base}[{requires}].result.pointer")]
    );
}

#[test]
fn a_revoked_key_name_is_not_reused_and_an_expiry_can_change() {
    let mut state = demo_state();
    state.keys.push(StoredKey {
        name: "old-bot".into(),
        scope: "support".into(),
        prefix: "sgk_00000000".into(),
        expires_at: None,
        revoked_at: Some(Utc::now()),
    });
    let mut doc = document(&state, Utc::now());
    assert_eq!(doc.keys.len(), 1, "revoked keys are not exported");
    let later = Utc::now() + chrono::Duration::days(7);
    doc.keys[0].expires_at = Some(later);
    let plan = plan_of(&state, &doc.to_yaml(), false).unwrap();
    assert_eq!(
        plan.to_string().lines().next(),
        Some("~ agent key support-bot: expires_at")
    );
    doc.keys.push(super::document::KeyDoc {
        name: "old-bot".into(),
        scope: Slug::parse("support").unwrap(),
        expires_at: None,
    });
    let issues = plan_of(&state, &doc.to_yaml(), false).unwrap_err();
    assert_eq!(paths(&issues), ["keys[1].name"]);
    assert!(issues[0].message.contains("revoked"), "{issues:?}");
}

#[test]
fn an_upstream_needs_the_fields_of_its_transport() {
    let mut doc = document(&demo_state(), Utc::now());
    doc.upstreams[0].transport = super::document::TransportDoc::Http;
    doc.upstreams[0].url = Some("ftp://crm.example/mcp".into());
    let issues = plan_of(&demo_state(), &doc.to_yaml(), false).unwrap_err();
    assert_eq!(
        paths(&issues),
        [
            "upstreams[0].command",
            "upstreams[0].args",
            "upstreams[0].url"
        ],
        "{issues:?}"
    );
}

fn https_state(ca_bundle: Option<String>) -> CatalogState {
    let mut state = demo_state();
    state.catalog.upstreams[0].kind = UpstreamKind::Http {
        url: "https://tools.internal/mcp".into(),
        ca_bundle,
        allow_plaintext: false,
    };
    state
}

#[test]
fn an_https_upstreams_ca_bundle_exports_and_applies_back_unchanged() {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let pem = params
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap()
        .pem();
    let state = https_state(Some(pem.clone()));
    let yaml = document(&state, Utc::now()).to_yaml();
    let doc = parse(yaml.as_bytes()).unwrap();
    assert_eq!(doc.upstreams[0].ca_bundle.as_deref(), Some(pem.as_str()));
    let plan = plan_of(&state, &yaml, true).unwrap();
    assert!(plan.is_empty(), "{plan}");
    // Without it, the same file is a change to the upstream.
    let plan = plan_of(&https_state(None), &yaml, true).unwrap();
    assert_eq!(plan.changes.len(), 1, "{plan}");
}

#[test]
fn a_ca_bundle_that_is_not_pem_certificates_is_an_issue_of_its_field() {
    let mut doc = document(&https_state(None), Utc::now());
    doc.upstreams[0].ca_bundle = Some("not a certificate".into());
    let issues = plan_of(&demo_state(), &doc.to_yaml(), false).unwrap_err();
    assert_eq!(paths(&issues), ["upstreams[0].ca_bundle"], "{issues:?}");
    assert!(
        issues[0].message.contains("no certificate found"),
        "{issues:?}"
    );
}

/// A document with one tool whose `input_schema` is `schema` (YAML, indented for the
/// field).
fn tool_doc(schema: &str) -> String {
    format!(
        "version: 1\ntools:\n- name: refund\n  upstream: demo\n  description: Refunds.\n  input_schema:\n{schema}"
    )
}

fn only_issue(text: &str) -> Issue {
    let issues = parse(text.as_bytes()).expect_err("the document is refused");
    assert_eq!(issues.len(), 1, "{issues:?}");
    issues.into_iter().next().unwrap()
}

#[test]
fn a_key_repeated_inside_a_schema_is_an_error_naming_its_path() {
    let text = tool_doc(
        "    type: object\n    properties:\n      amount:\n        type: number\n        maximum: 10\n        maximum: 1000000\n",
    );
    let issue = only_issue(&text);
    assert_eq!(
        issue.to_string(),
        r#"tools[0].input_schema.properties.amount: duplicate key "maximum""#
    );
}

#[test]
fn a_key_repeated_in_a_json_document_is_an_error_naming_its_path() {
    let text = r#"{"version": 1, "tools": [{"name": "refund", "upstream": "demo",
        "description": "Refunds.",
        "input_schema": {"type": "object", "required": ["amount"], "type": "array"}}]}"#;
    let issue = only_issue(text);
    assert_eq!(issue.path, "tools[0].input_schema");
    assert_eq!(issue.message, r#"duplicate key "type""#);
}

#[test]
fn a_key_repeated_at_the_top_in_frontmatter_or_quoted_differently_is_an_error() {
    let top = only_issue("version: 1\nroles: []\nversion: 1\n");
    assert_eq!(top.to_string(), r#".: duplicate key "version""#);

    let mut yaml = demo_yaml();
    let at = yaml.find("instructions:").expect("the demo has a skill");
    yaml.insert_str(at, "frontmatter:\n    license: MIT\n    'license': GPL\n  ");
    let issue = only_issue(&yaml);
    assert!(issue.path.ends_with("].frontmatter"), "{issue}");
    assert_eq!(issue.message, r#"duplicate key "license""#);

    // `1` and `"1"` are one key once read.
    let issue = only_issue(&tool_doc(
        "    enum_labels:\n      1: one\n      \"1\": uno\n",
    ));
    assert_eq!(
        issue.to_string(),
        r#"tools[0].input_schema.enum_labels: duplicate key "1""#
    );
}

#[test]
fn the_same_key_in_sibling_mappings_is_not_a_duplicate() {
    let text = tool_doc(
        "    type: object\n    properties:\n      a: {type: number, maximum: 1}\n      b: {type: number, maximum: 2}\n",
    );
    assert!(parse(text.as_bytes()).is_ok());
}

#[test]
fn a_schema_shared_through_a_yaml_alias_still_reads() {
    let text = tool_doc(
        "    type: object\n    properties:\n      from: &money {type: number, minimum: 0}\n      to: *money\n",
    );
    let doc = parse(text.as_bytes()).unwrap();
    let schema = &doc.tools[0].input_schema.0;
    assert_eq!(schema["properties"]["from"], schema["properties"]["to"]);
}

#[test]
fn a_document_that_aliases_blow_up_is_refused_before_it_is_expanded() {
    // "Billion laughs": ten levels of ten aliases, 10^10 strings once expanded.
    let mut schema = String::from(
        "    l0: &l0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for level in 1..10 {
        let prev = format!("*l{}", level - 1);
        schema.push_str(&format!(
            "    l{level}: &l{level} [{}]\n",
            [prev.as_str(); 10].join(",")
        ));
    }
    let started = std::time::Instant::now();
    let issue = only_issue(&tool_doc(&schema));
    assert!(issue.message.contains("YAML aliases"), "{issue}");
    assert!(issue.path.starts_with("tools[0].input_schema.l"), "{issue}");

    // Wide rather than deep: one anchored list of 20,000 strings, aliased 20,000 times,
    // is well inside the parser's own guard (100 alias jumps per event) but would be
    // 400 million strings.
    let strings = vec!["\"0123456789\""; 20_000].join(",");
    let aliases = vec!["*wide"; 20_000].join(",");
    let schema = format!("    a: &wide [{strings}]\n    b: [{aliases}]\n");
    let issue = only_issue(&tool_doc(&schema));
    assert!(issue.message.contains("YAML aliases"), "{issue}");
    assert!(
        issue.path.starts_with("tools[0].input_schema.b["),
        "{issue}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "refused early, not after expanding: {:?}",
        started.elapsed()
    );
}

/// The demo catalog with `tier-1-support` also checking `process_refund`'s text arguments.
fn string_checks_state() -> CatalogState {
    use crate::model::{ArgCheck, Limit};
    let mut state = demo_state();
    let role = state
        .catalog
        .roles
        .iter_mut()
        .find(|r| r.slug.as_str() == "tier-1-support")
        .unwrap();
    for (arg, check) in [
        ("reason", ArgCheck::NoShell),
        (
            "order_id",
            ArgCheck::PathUnder {
                root: "/srv/orders".into(),
            },
        ),
        (
            "customer_id",
            ArgCheck::UrlHost {
                hosts: vec!["api.example.com".into(), "*.example.net".into()],
            },
        ),
    ] {
        role.limits.push(Limit::ArgBound {
            tool: "process_refund".into(),
            arg: arg.into(),
            check,
        });
    }
    state
}

#[test]
fn string_argument_checks_export_and_apply_back_unchanged() {
    let state = string_checks_state();
    assert_eq!(state.catalog.validate(), Ok(()));
    let yaml = document(&state, Utc::now()).to_yaml();
    assert!(yaml.contains("check: no_shell"), "{yaml}");
    assert!(yaml.contains("root: /srv/orders"), "{yaml}");
    assert!(yaml.contains("- '*.example.net'"), "{yaml}");
    let doc = parse(yaml.as_bytes()).unwrap();
    assert_eq!(doc, document(&state, Utc::now()));
    let plan = plan_of(&state, &yaml, true).unwrap();
    assert!(plan.is_empty(), "{plan}");
    // Applied to a catalog without them, the same file changes only that role.
    let plan = plan_of(&demo_state(), &yaml, false).unwrap();
    assert_eq!(plan.changes.len(), 1, "{plan}");
    assert_eq!(plan.changes[0].name.as_str(), "tier-1-support", "{plan}");
}

#[test]
fn a_string_check_missing_its_field_or_with_a_bad_one_is_named_by_path() {
    let doc = document(&string_checks_state(), Utc::now());
    let tier1 = doc
        .roles
        .iter()
        .position(|r| r.slug.as_str() == "tier-1-support")
        .unwrap();
    let count = doc.roles[tier1].limits.len();
    let (path, hosts) = (count - 2, count - 1);
    let base = format!("roles[{tier1}].limits");
    let mut missing = doc.clone();
    missing.roles[tier1].limits[path].root = None;
    missing.roles[tier1].limits[hosts].hosts = None;
    let issues = plan_of(&demo_state(), &missing.to_yaml(), false).unwrap_err();
    assert_eq!(
        paths(&issues),
        [
            format!("{base}[{path}].root"),
            format!("{base}[{hosts}].hosts")
        ],
        "{issues:?}"
    );
    let mut wrong = doc;
    wrong.roles[tier1].limits[path].root = Some("orders".into());
    let issues = plan_of(&demo_state(), &wrong.to_yaml(), false).unwrap_err();
    assert_eq!(
        paths(&issues),
        [format!("{base}[{path}].root")],
        "{issues:?}"
    );
    wrong.roles[tier1].limits[path].root = Some("/srv/orders".into());
    wrong.roles[tier1].limits[hosts].hosts = Some(vec!["localhost".into()]);
    let issues = plan_of(&demo_state(), &wrong.to_yaml(), false).unwrap_err();
    assert_eq!(
        paths(&issues),
        [format!("{base}[{hosts}].hosts")],
        "{issues:?}"
    );
    assert!(issues[0].message.contains("loopback"), "{issues:?}");
}

#[test]
fn an_inspection_section_plans_one_policy_change_and_a_file_without_it_keeps_the_stored_policy() {
    let section = "inspection:\n  rules:\n  - inspector: injection\n    action: block\n    tool: lookup_customer\n  schemas:\n    validate_formats: false\n";
    let yaml = format!("{}{section}", demo_yaml());
    let plan = plan_of(&demo_state(), &yaml, false).unwrap();
    assert_eq!(plan.changes.len(), 1, "{plan}");
    let change = &plan.changes[0];
    assert_eq!(
        (change.kind, change.action, change.name.as_str()),
        (EntityKind::Inspection, Action::Change, "policy")
    );
    assert_eq!(change.fields, ["rules", "schemas"], "{plan}");
    assert_eq!(change.audit_action(), "inspection.update");
    assert_eq!(change.target(), "inspection:policy");

    // Stored, it exports as the section; a file without one keeps it, unless pruned.
    let mut state = demo_state();
    state.catalog.inspection = parse(yaml.as_bytes())
        .unwrap()
        .inspection
        .unwrap()
        .to_policy();
    let exported = document(&state, Utc::now()).to_yaml();
    assert!(
        exported.ends_with(
            "  schemas:\n    close_open_objects: false\n    validate_formats: false\n  definitions:\n    refuse_admission_with_findings: false\n"
        ),
        "{exported}"
    );
    assert!(plan_of(&state, &exported, true).unwrap().is_empty());
    assert!(plan_of(&state, &demo_yaml(), false).unwrap().is_empty());
    let pruned = plan_of(&state, &demo_yaml(), true).unwrap();
    assert_eq!(pruned.changes.len(), 1, "{pruned}");
    assert_eq!(pruned.changes[0].kind, EntityKind::Inspection);
}

#[test]
fn an_inspection_rule_naming_an_unknown_tool_or_a_cap_it_cannot_have_is_refused_by_path() {
    let yaml = format!(
        "{}inspection:\n  rules:\n  - inspector: secrets\n    action: block\n    tool: nope\n  - inspector: egress\n    action: flag\n    max_bytes: 10\n  - inspector: result_size\n    action: block\n",
        demo_yaml()
    );
    let issues = plan_of(&demo_state(), &yaml, false).unwrap_err();
    assert_eq!(
        paths(&issues),
        [
            "inspection.rules[0].tool",
            "inspection.rules[1].max_bytes",
            "inspection.rules[2].max_bytes"
        ],
        "{issues:?}"
    );
    let unknown_field = format!(
        "{}inspection:\n  rules:\n  - inspector: secrets\n    action: block\n    tol: x\n",
        demo_yaml()
    );
    let issues = plan_of(&demo_state(), &unknown_field, false).unwrap_err();
    assert_eq!(paths(&issues), ["inspection.rules[0].tol"], "{issues:?}");
}
