//! `AdminService::apply_catalog` on a real SQLite file: tool pins and quarantines through
//! a catalog file, new skill versions, kept upstream credentials, and a file applied while
//! the catalog changed under it.

use std::collections::BTreeMap;
use std::sync::Arc;

use skillgate_core::admin::{AdminService, CredentialUpdate};
use skillgate_core::audit::AuditLog;
use skillgate_core::catalog_code::document::ToolDoc;
use skillgate_core::catalog_code::{
    Action, ApplyError, ApplyOptions, ApplyReport, CatalogDocument, CatalogFile,
};
use skillgate_core::demo::tools::tool_specs;
use skillgate_core::model::ToolSpec;
use skillgate_core::policy::CatalogHandle;
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_core::upstream::Secret;

struct Fixture {
    service: AdminService,
    store: Store,
    _dir: tempfile::TempDir,
}

/// The demo catalog, seeded (and so admitted) into a fresh database file.
async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = skillgate_core::store::testing::database_url(dir.path(), "apply.db");
    let store = Store::open(&url).await.unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    let handle = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let service = AdminService::new(store.clone(), AuditLog::new(store.clone()), handle);
    Fixture {
        service,
        store,
        _dir: dir,
    }
}

fn demo() -> Slug {
    Slug::parse("demo").unwrap()
}

/// The demo tools as its upstream offers them, `change` applied to one of them.
fn offered(name: &str, change: impl FnOnce(&mut ToolSpec)) -> Vec<ToolSpec> {
    let mut specs: Vec<ToolSpec> = tool_specs()
        .into_iter()
        .map(|mut s| {
            s.sensitive_args.clear();
            s
        })
        .collect();
    if let Some(spec) = specs.iter_mut().find(|s| s.name == name) {
        change(spec);
    }
    specs
}

const OFFERED: &str = "Find a customer by id or email (now with loyalty tier).";

async fn apply(service: &AdminService, doc: &CatalogDocument, prune: bool) -> ApplyReport {
    let file = CatalogFile::parse(doc.to_yaml().as_bytes()).unwrap();
    service
        .apply_catalog(
            &file,
            ApplyOptions {
                prune,
                dry_run: false,
            },
        )
        .await
        .unwrap()
}

fn tool<'d>(doc: &'d mut CatalogDocument, name: &str) -> &'d mut ToolDoc {
    doc.tools.iter_mut().find(|t| t.name == name).unwrap()
}

#[tokio::test]
async fn a_quarantined_tool_is_exported_at_its_pin_and_writing_the_offer_into_the_file_admits_it() {
    let f = fixture().await;
    f.service
        .sync_tools(
            &demo(),
            offered("lookup_customer", |s| s.description = OFFERED.into()),
        )
        .await
        .unwrap();
    let mut doc = f.service.export_catalog().await.unwrap();
    let pinned = tool(&mut doc, "lookup_customer").clone();
    assert_ne!(
        pinned.description, OFFERED,
        "the export is the admitted definition"
    );
    assert!(apply(&f.service, &doc, true).await.plan.is_empty());
    let pin = f.store.tool_pin("lookup_customer").await.unwrap().unwrap();
    assert!(pin.quarantined_since.is_some(), "still quarantined");

    // Admitting through the file: the offered definition with its pin.
    let entry = tool(&mut doc, "lookup_customer");
    entry.description = OFFERED.into();
    entry.pin = Some(entry.spec().pin());
    let report = apply(&f.service, &doc, false).await;
    let change = &report.plan.changes[0];
    assert_eq!(
        (change.action, change.target(), change.fields.clone()),
        (
            Action::Change,
            "tool:lookup_customer".to_owned(),
            vec!["description".to_owned()]
        ),
        "{}",
        report.plan
    );
    let pin = f.store.tool_pin("lookup_customer").await.unwrap().unwrap();
    assert_eq!(pin.quarantined_since, None, "admitted");
    assert_eq!(pin.pin, pin.pinned.as_ref().map(ToolSpec::pin));
    let live = f.service.live();
    let live = live.catalog().tool("lookup_customer").unwrap();
    assert_eq!(
        (live.spec.description.as_str(), &live.quarantine),
        (OFFERED, &None)
    );
    // The upstream keeps offering it: nothing to quarantine any more.
    let sync = f
        .service
        .sync_tools(
            &demo(),
            offered("lookup_customer", |s| s.description = OFFERED.into()),
        )
        .await
        .unwrap();
    assert!(sync.changes.is_empty(), "{:?}", sync.changes);
}

#[tokio::test]
async fn a_definition_in_the_file_that_the_upstream_does_not_offer_is_pinned_and_quarantined() {
    let f = fixture().await;
    let mut doc = f.service.export_catalog().await.unwrap();
    let entry = tool(&mut doc, "lookup_customer");
    entry.description = "Not what the upstream says.".into();
    entry.pin = Some(entry.spec().pin());
    apply(&f.service, &doc, false).await;
    let pin = f.store.tool_pin("lookup_customer").await.unwrap().unwrap();
    assert!(pin.quarantined_since.is_some(), "calls are refused");
    let upstream_offer = offered("lookup_customer", |_| {})
        .into_iter()
        .find(|s| s.name == "lookup_customer")
        .unwrap();
    assert_eq!(pin.offered_pin(), Some(upstream_offer.pin()));
    assert!(
        f.service
            .live()
            .catalog()
            .tool("lookup_customer")
            .unwrap()
            .quarantine
            .is_some()
    );
}

#[tokio::test]
async fn a_tool_no_admin_admitted_is_not_exported_nor_pruned_and_listing_it_admits_it() {
    let f = fixture().await;
    let mut specs = offered("", |_| {});
    let mut fresh = specs[0].clone();
    fresh.name = "issue_gift_card".into();
    fresh.description = "Issue a gift card.".into();
    specs.push(fresh.clone());
    f.service.sync_tools(&demo(), specs).await.unwrap();
    let mut doc = f.service.export_catalog().await.unwrap();
    assert!(doc.tools.iter().all(|t| t.name != "issue_gift_card"));
    assert!(apply(&f.service, &doc, true).await.plan.is_empty());
    assert!(f.store.tool_pin("issue_gift_card").await.unwrap().is_some());

    doc.tools.push(ToolDoc::from_spec(&demo(), &fresh));
    doc.tools.sort_by(|a, b| a.name.cmp(&b.name));
    let report = apply(&f.service, &doc, true).await;
    assert_eq!(
        report.plan.to_string().lines().next(),
        Some("~ tool issue_gift_card: admitted (the file's definition is admitted and pinned)")
    );
    let pin = f.store.tool_pin("issue_gift_card").await.unwrap().unwrap();
    assert_eq!((pin.pin, pin.quarantined_since), (Some(fresh.pin()), None));
}

#[tokio::test]
async fn changed_skill_text_is_a_new_version_and_an_upstream_keeps_its_stored_credentials() {
    let f = fixture().await;
    let upstream = f.store.list_upstreams().await.unwrap().remove(0);
    let env = BTreeMap::from([("API_TOKEN".to_owned(), Secret::new("s3cr3t-value"))]);
    f.service
        .register_upstream(
            "admin",
            &upstream,
            CredentialUpdate {
                env: Some(env),
                ..CredentialUpdate::default()
            },
        )
        .await
        .unwrap();
    let mut doc = f.service.export_catalog().await.unwrap();
    assert!(!doc.to_yaml().contains("s3cr3t") && !doc.to_yaml().contains("API_TOKEN"));
    doc.upstreams[0].args.push("--verbose".into());
    let skill = doc
        .skills
        .iter_mut()
        .find(|s| s.slug.as_str() == "customer-lookup")
        .unwrap();
    skill
        .instructions
        .push_str("\n\nGreet the customer by name.");
    let report = apply(&f.service, &doc, false).await;
    assert_eq!(
        report.plan.to_string(),
        "~ upstream demo: args (its stored credentials are kept)\n    \
         args: [\"demo-upstream\"] → [\"demo-upstream\",\"--verbose\"]\n\
         ~ skill customer-lookup: instructions (a new version after version 1)\n    \
         instructions: …\"nds and escalations.\" (1022 characters) → \
         …\"nds and escalations.\\n\\nGreet the customer by name.\" (1051 characters)\n\
         0 to create, 2 to change, 0 to remove\n"
    );
    let versions = f
        .store
        .skill_versions(&Slug::parse("customer-lookup").unwrap())
        .await
        .unwrap();
    assert_eq!(versions.len(), 2);
    assert!(versions[1].skill.instructions.ends_with("by name."));
    let credentials = f.store.upstream_credentials().await.unwrap();
    assert_eq!(
        credentials["demo"].env["API_TOKEN"].expose(),
        "s3cr3t-value",
        "credentials are never in the file and are kept as stored"
    );
    assert!(apply(&f.service, &doc, false).await.plan.is_empty());
}

#[tokio::test]
async fn a_dry_run_plans_against_the_database_and_writes_nothing() {
    let f = fixture().await;
    let mut doc = f.service.export_catalog().await.unwrap();
    doc.roles.retain(|r| r.slug.as_str() != "system-admin");
    doc.scopes.retain(|s| s.slug.as_str() != "ops");
    let file = CatalogFile::parse(doc.to_yaml().as_bytes()).unwrap();
    let options = ApplyOptions {
        prune: true,
        dry_run: true,
    };
    let tip = AuditLog::new(f.store.clone()).tip().await.unwrap();
    let report = f.service.apply_catalog(&file, options).await.unwrap();
    assert!(!report.applied);
    assert_eq!(report.plan.count(Action::Remove), 2, "{}", report.plan);
    assert_eq!(AuditLog::new(f.store.clone()).tip().await.unwrap(), tip);
    assert!(
        f.store
            .get_role(&Slug::parse("system-admin").unwrap())
            .await
            .unwrap()
            .is_some()
    );

    // An invalid file is refused the same way when it would be written.
    doc.roles[0].skills.push(Slug::parse("juggling").unwrap());
    let file = CatalogFile::parse(doc.to_yaml().as_bytes()).unwrap();
    match f
        .service
        .apply_catalog(&file, ApplyOptions::default())
        .await
    {
        Err(ApplyError::Invalid(issues)) => {
            let last = doc.roles[0].skills.len() - 1;
            assert_eq!(
                issues[0].path,
                format!("roles[0].skills[{last}]"),
                "{issues:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(AuditLog::new(f.store.clone()).tip().await.unwrap(), tip);
}
