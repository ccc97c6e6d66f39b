//! The demo catalog: roles, skills, limits and scopes of the Skilder paper's support company.
//!
//! The tool definitions come from [`super::tools::tool_specs`]; everything an agent reads
//! when it learns a role (instructions, skills, the refund policy) is written here.

use rust_decimal::Decimal;

use super::tools::tool_specs;
use crate::model::{
    ApprovalCondition, ArgCheck, CatalogDraft, CatalogTool, CmpOp, Limit, Resource, ResultCheck,
    Role, Scope, Skill,
};
use crate::slug::Slug;

/// The name of the upstream that serves the demo tools (`skillgate demo-upstream`).
pub const DEMO_UPSTREAM: &str = "demo";

/// The demo company's catalog, ready to be seeded into an empty database.
pub fn demo_catalog() -> CatalogDraft {
    let upstream = slug(DEMO_UPSTREAM);
    CatalogDraft {
        tools: tool_specs()
            .into_iter()
            .map(|spec| CatalogTool {
                upstream: upstream.clone(),
                spec,
                quarantine: None,
            })
            .collect(),
        skills: skills(),
        roles: roles(),
        scopes: scopes(),
    }
}

fn slug(text: &str) -> Slug {
    Slug::parse(text).expect("demo names are slugs")
}

fn slugs(texts: &[&str]) -> Vec<Slug> {
    texts.iter().map(|t| slug(t)).collect()
}

fn names(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| (*t).to_owned()).collect()
}

fn skill(name: &str, description: &str, tools: &[&str], instructions: &str) -> Skill {
    Skill {
        slug: slug(name),
        description: description.to_owned(),
        instructions: instructions.trim().to_owned(),
        tools: names(tools),
        resources: Vec::new(),
        frontmatter_extra: Default::default(),
    }
}

fn refund_cap(per_call: i64) -> Limit {
    Limit::ArgBound {
        tool: "process_refund".to_owned(),
        arg: "amount".to_owned(),
        check: ArgCheck::Compare {
            op: CmpOp::Le,
            value: Decimal::from(per_call),
        },
    }
}

fn requires(tool: &str, after: &[&str]) -> Limit {
    Limit::Requires {
        tool: tool.to_owned(),
        after: names(after),
        same_args: Vec::new(),
        result: None,
    }
}

/// A refund needs an eligibility check of the same order that answered `eligible: true`:
/// a check of another order, or one that said no, does not open the way.
fn refund_requires_eligible_check() -> Limit {
    Limit::Requires {
        tool: "process_refund".to_owned(),
        after: names(&["check_refund_eligibility"]),
        same_args: names(&["order_id"]),
        result: Some(ResultCheck {
            pointer: "/eligible".to_owned(),
            equals: serde_json::Value::Bool(true),
        }),
    }
}

/// A refund above 200 waits for a reviewer: a newcomer sees a hold on day one.
fn refunds_over_200_need_approval() -> Limit {
    Limit::RequiresApproval {
        tool: "process_refund".to_owned(),
        when: Some(ApprovalCondition {
            arg: "amount".to_owned(),
            op: CmpOp::Gt,
            value: Decimal::from(200),
        }),
        expires_in_minutes: None,
    }
}

/// A tool a scope's sessions may never call, whichever role grants it.
fn never(tool: &str) -> Limit {
    Limit::CountCap {
        tool: tool.to_owned(),
        max: 0,
    }
}

/// What the `support` scope refunds per session, whichever of its roles issues the refunds.
fn support_refund_guardrail() -> Limit {
    Limit::SumCap {
        tool: "process_refund".to_owned(),
        arg: "amount".to_owned(),
        max: Decimal::from(1000),
    }
}

fn skills() -> Vec<Skill> {
    let mut refund_handling = skill(
        "refund-handling",
        "Decide whether an order qualifies for a refund and issue it within policy.",
        &["check_refund_eligibility", "process_refund"],
        REFUND_HANDLING,
    );
    refund_handling.resources.push(Resource {
        name: slug("refund-policy"),
        title: "Refund policy".to_owned(),
        content: REFUND_POLICY.trim().to_owned(),
    });
    let mut customer_lookup = skill(
        "customer-lookup",
        "Identify the customer and read their account and order history before acting.",
        &["lookup_customer", "get_order_history"],
        CUSTOMER_LOOKUP,
    );
    customer_lookup.resources.push(Resource {
        name: slug("identity-checks"),
        title: "Identity checks".to_owned(),
        content: IDENTITY_CHECKS.trim().to_owned(),
    });
    let mut retention_playbook = skill(
        "retention-playbook",
        "Keep a customer who wants to cancel: ticket, extension, service credit, and only then a refund.",
        &[
            "create_ticket",
            "offer_extension",
            "apply_service_credit",
            "process_refund",
        ],
        RETENTION,
    );
    retention_playbook.resources.push(Resource {
        name: slug("service-credits"),
        title: "Service credits".to_owned(),
        content: SERVICE_CREDITS.trim().to_owned(),
    });
    vec![
        customer_lookup,
        refund_handling,
        skill(
            "ticketing-and-escalation",
            "Record every case in a ticket, answer from the response policy, and hand billing questions over.",
            &[
                "create_ticket",
                "escalate_to_billing",
                "get_response_policy",
            ],
            TICKETING,
        ),
        retention_playbook,
        skill(
            "billing-operations",
            "Read billing history, update payment methods and issue larger refunds.",
            &[
                "lookup_customer",
                "view_billing_history",
                "update_payment_method",
                "process_refund",
            ],
            BILLING,
        ),
        skill(
            "fraud-investigation",
            "Investigate suspicious account activity and flag accounts on evidence.",
            &[
                "lookup_customer",
                "investigate_account_activity",
                "flag_account",
            ],
            FRAUD,
        ),
        skill(
            "account-administration",
            "Reset passwords and delete user accounts on a verified request.",
            &["reset_user_password", "delete_user_account"],
            ACCOUNT_ADMIN,
        ),
        skill(
            "skill-curation",
            "Read feedback on a skill, record cited patterns and propose a revision for human review.",
            &[
                "list_skill_feedback",
                "get_skill",
                "add_wiki_pattern",
                "propose_skill_revision",
            ],
            CURATION,
        ),
    ]
}

fn roles() -> Vec<Role> {
    vec![
        Role {
            slug: slug("tier-1-support"),
            title: "Tier 1 support".to_owned(),
            description: "Front-line customer support: look up customers and orders, open tickets, answer from the response policy, escalate billing questions, and refund eligible orders up to 500 per refund and 1000 per session (above 200 with a reviewer's approval).".to_owned(),
            instructions: "You are the first person a customer talks to. Identify the customer before anything else, keep one ticket per case, and answer from the response policy rather than from memory. Refunds are yours up to the limits below; anything larger, or anything about payment methods, goes to billing through `escalate_to_billing`.".to_owned(),
            skills: slugs(&["customer-lookup", "refund-handling", "ticketing-and-escalation"]),
            limits: vec![
                refund_cap(500),
                Limit::SumCap { tool: "process_refund".to_owned(), arg: "amount".to_owned(), max: Decimal::from(1000) },
                refund_requires_eligible_check(),
                refunds_over_200_need_approval(),
            ],
        },
        Role {
            slug: slug("retention-desk"),
            title: "Retention desk".to_owned(),
            description: "Customers who want to cancel: understand why, offer an extension and a service credit, and refund (up to 500 per refund) only after both were offered and the case is ticketed.".to_owned(),
            instructions: "Your goal is to keep customers who are about to leave, honestly. The institutional policy is strict about order: open a ticket, offer an extension, apply a service credit, and only then, if the customer still wants their money back, process a refund. The gateway enforces this order; a refund attempted earlier is refused.".to_owned(),
            skills: slugs(&["customer-lookup", "retention-playbook"]),
            limits: vec![
                refund_cap(500),
                requires("process_refund", &["create_ticket", "offer_extension", "apply_service_credit"]),
            ],
        },
        Role {
            slug: slug("billing-admin"),
            title: "Billing administrator".to_owned(),
            description: "Billing operations: read billing history, update payment methods, and issue refunds up to 5000 per refund.".to_owned(),
            instructions: "You handle money and payment data. Read the billing history before changing anything, never repeat a card token back to anyone, and refund only what the history shows was charged. Refunds above 5000 need a human finance approver outside this system.".to_owned(),
            skills: slugs(&["billing-operations"]),
            limits: vec![refund_cap(5000)],
        },
        Role {
            slug: slug("security-fraud"),
            title: "Security and fraud".to_owned(),
            description: "Investigate suspicious account activity and flag accounts, always after an investigation.".to_owned(),
            instructions: "You protect customers and the company from account takeover and payment fraud. Investigate before you act: a flag without an investigation in the same session is refused. Do not tell the customer what exactly triggered suspicion.".to_owned(),
            skills: slugs(&["fraud-investigation"]),
            limits: vec![requires("flag_account", &["investigate_account_activity"])],
        },
        Role {
            slug: slug("system-admin"),
            title: "System administrator".to_owned(),
            description: "Account administration for internal users: password resets and account deletion.".to_owned(),
            instructions: "You administer login accounts. Both of your tools are irreversible or security-sensitive: act only on a request you can tie to a ticket, and confirm deletions explicitly.".to_owned(),
            skills: slugs(&["account-administration"]),
            limits: Vec::new(),
        },
        Role {
            slug: slug("skill-curator"),
            title: "Skill curator".to_owned(),
            description: "Improves skills from use: reads feedback, records cited wiki patterns and proposes revisions that a human reviewer approves or rejects.".to_owned(),
            instructions: "You curate skills. Nothing you propose reaches other agents until a human reviewer approves it, so cite the feedback, sessions and patterns behind every change and give honest evidence.".to_owned(),
            skills: slugs(&["skill-curation"]),
            limits: Vec::new(),
        },
    ]
}

fn scopes() -> Vec<Scope> {
    vec![
        Scope {
            slug: slug("support"),
            description: "Customer-facing support agents.".to_owned(),
            roles: slugs(&["tier-1-support", "retention-desk", "security-fraud"]),
            guardrails: vec![support_refund_guardrail()],
        },
        Scope {
            slug: slug("billing"),
            description: "Billing agents.".to_owned(),
            roles: slugs(&["billing-admin", "tier-1-support"]),
            guardrails: Vec::new(),
        },
        Scope {
            slug: slug("ops"),
            description: "Internal operations agents.".to_owned(),
            roles: slugs(&["system-admin"]),
            guardrails: Vec::new(),
        },
        // Curator tools read only the skills of the scope's roles, so a curator's scope
        // names the roles whose skills it curates.
        Scope {
            slug: slug("curation"),
            description: "Curator agents that propose revisions of the tier-1 support skills; they read what tier-1 agents do, never act for them."
                .to_owned(),
            roles: slugs(&["skill-curator", "tier-1-support"]),
            // Learnable so its skills are in the curators' reach, but a curator never
            // refunds, opens tickets or escalates: the scope forbids it whatever role is learned.
            guardrails: vec![
                never("process_refund"),
                never("create_ticket"),
                never("escalate_to_billing"),
            ],
        },
    ]
}

const CURATION: &str = r#"
# Skill curation

Start from what agents and reviewers said. Call `list_skill_feedback` for the skill; every
item has a `feedback_id`, and agent feedback names its `session_id`. Feedback of kind
`requirement` is an explicit human requirement: a revision must show that it fulfils it.

Read the current instructions with `get_skill` (it also lists the skill's wiki patterns).
When several pieces of feedback point at the same lesson, record it once with
`add_wiki_pattern`, citing the feedback or session IDs it rests on.

Propose a change with `propose_skill_revision`: the full new instructions, a note that says
why, the IDs you cite, and evidence (numeric scores or paired better/tie/worse cases with
requirement checks). Cite only IDs that exist; the server refuses anything else. The server
computes the gate verdict, and a human reviewer decides.
"#;

const CUSTOMER_LOOKUP: &str = r#"
# Customer lookup

Every case starts by knowing exactly who you are talking to. Call `lookup_customer` with the
customer id (`C-` followed by four digits) or, if the customer only gave an email address,
with `email`. Read back the name on the account and make sure it matches the person you are
helping before you discuss orders, billing or anything else on the account.

If the lookup returns no customer, ask once more for the id or email and try again. Do not
guess ids, and never act on an account you could not identify: a wrong account is worse than
a slow answer.

Once the customer is identified, call `get_order_history` with the same customer id to see
their orders (`O-` followed by four digits), amounts, dates and delivery status. Most
questions (where is my order, was I charged twice, can I get my money back) are answered by
the history, so read it before you promise anything.

Keep what you learned in the conversation: you will need the customer id and the order id
for tickets, refunds and escalations.
"#;

const REFUND_HANDLING: &str = r#"
# Refund handling

Refunds are money leaving the company, so they follow a fixed path. First identify the
customer and the order (see *customer-lookup*). Then call `check_refund_eligibility` with the
customer id and order id. The answer says whether the order is eligible and the maximum
amount that may be refunded. Read the `refund-policy` document of this skill if the customer
disputes the answer.

Only after an eligibility check has succeeded in this session may you call `process_refund`
with `customer_id`, `order_id`, `amount` (a number, in USD, never more than the eligible
amount) and a short `reason` in the customer's words. The gateway refuses a refund that was
not preceded by an eligibility check.

Your role bounds refunds: each refund has a maximum amount, and the refunds of one session
have a total cap. These limits are listed with your role. If a customer needs more than
your limits allow, do not split the refund into smaller ones to get around the cap: open a
ticket and call `escalate_to_billing` with the reason and the amount still owed.

After a refund, tell the customer the amount, that it goes back to the original payment
method, and that it takes five to ten business days to appear.
"#;

const IDENTITY_CHECKS: &str = r#"
# Identity checks

**Before you disclose anything.** A customer is identified when the account a lookup returns
matches the person on two points: the name on the account, and one of the email address on
file, the id of a recent order, or the delivery postcode of a recent order. Ask for the
second point; never read it out and ask the customer to confirm it.

**When the points do not match.** Say that you cannot find a matching account, ask once more
for the customer id or email, and look up again. Do not suggest which detail was wrong: that
tells a caller who is not the customer what the account holds.

**Third parties.** A partner, parent or colleague of the customer is not the customer. Help
them with general questions only; anything about the account waits for the customer.

**Suspected fraud.** Several failed checks on one account, or a caller who pushes for account
details, is a reason to stop and record the case in a ticket for the fraud team.
"#;

const REFUND_POLICY: &str = r#"
# Refund policy

**Scope.** This policy applies to every order placed through our store or our subscription
plans. It is the only basis on which support staff may promise or issue a refund.

**1. Eligibility window.** An order is eligible for a full refund within 30 days of delivery.
Between 31 and 60 days, an order is eligible for a partial refund of at most 50% of its
price. After 60 days, orders are not refundable, except under section 4.

**2. Condition.** Physical goods must be returned unused, in their original packaging. A
refund for physical goods is issued when the return is registered, not when it arrives.
Digital goods and subscriptions are refundable only if they were not used after purchase,
or if the service was unavailable for more than 24 hours in the billing period.

**3. Amount.** A refund never exceeds what the customer paid for the order, including tax,
minus any service credit already granted for the same order. Shipping is refunded only when
the item arrived damaged or the wrong item was sent.

**4. Exceptions.** Damaged, defective or wrongly delivered items are refundable in full at any
time within one year. Duplicate charges are always refunded in full. Exceptions beyond these
need approval from billing and are escalated, never granted at the front line.

**5. Limits by role.** Tier 1 support refunds at most 500 per refund and 1000 per session;
billing administrators at most 5000 per refund. Larger refunds need a finance approver.
Splitting one refund into several to stay under a limit is a policy violation.

**6. Method and timing.** Refunds go back to the original payment method and appear within
five to ten business days. We do not refund in cash, gift cards or to a different card.

**7. Records.** Every refund has a ticket that states the order, the amount, the section of
this policy that makes it eligible, and the customer's reason.
"#;

const TICKETING: &str = r#"
# Ticketing and escalation

Every case gets exactly one ticket. Call `create_ticket` with the customer id, a subject of a
few words, a description of what the customer asked and what you did, and a priority: `low`
for questions, `normal` for most problems, `high` when the customer cannot use what they
paid for, `urgent` only for outages, security concerns or payments taken in error.

When you are unsure how to answer (delivery times, warranty terms, what we may say about an
outage), call `get_response_policy` with the topic and answer from what it returns. Quote
the policy rather than improvising, and never promise something the policy does not state.

Billing questions you cannot resolve (refunds above your limit, disputed charges, payment
method changes) go to billing: call `escalate_to_billing` with the customer id, the ticket
context and a clear summary of what is needed. Tell the customer their case was handed to
billing and that billing answers within one business day.

Close the conversation by telling the customer what happens next and when.
"#;

const RETENTION: &str = r#"
# Retention playbook

A customer who asks to cancel or wants their money back is often telling you something went
wrong. Listen first: ask what made them want to leave, and look at their account and order
history (see *customer-lookup*) before you offer anything.

Follow the institutional order, which the gateway enforces:

1. `create_ticket` to record the cancellation request and the reason in the customer's words.
2. `offer_extension`: add one to three months to their plan at no charge. Explain what it
   gives them; it often solves the underlying problem.
3. `apply_service_credit`: a credit for the trouble, proportionate to what went wrong.
4. Only if the customer still wants their money back after both offers, `process_refund`.
   A refund attempted before the ticket, the extension and the credit is refused.

Be honest: do not pressure, do not invent deadlines, and respect a clear "no". A customer who
declines the extension still gets it offered (the call records the offer); note the refusal
in the ticket.
"#;

const SERVICE_CREDITS: &str = r#"
# Service credits

A service credit says sorry in the customer's currency. Size it to what went wrong, not to
how upset the customer sounds, and say in the ticket which line below you applied.

| what went wrong | credit |
| --- | --- |
| a late delivery (up to a week) | 5 USD |
| a late delivery (more than a week), or a missing item we reshipped | 15 USD |
| a service outage of more than 24 hours in the billing period | one month of the plan's price |
| a billing error we corrected | 10 USD, on top of the correction |

One credit per case. A credit is not a refund: it lands on the next invoice, and it does not
change whether the order itself is refundable.
"#;

const BILLING: &str = r#"
# Billing operations

You work with money and payment data. Identify the customer with `lookup_customer`, then read
`view_billing_history` for the period in question before you change anything. The history
shows every charge, refund and credit with dates; most disputes are settled by reading it
carefully with the customer.

To change how a customer pays, call `update_payment_method` with the customer id and the
card token the payment processor issued. Never ask for, read back, or write down card
numbers; the token is the only thing you handle, and it is stored as a digest in the audit.

Refunds for disputed or duplicate charges go through `process_refund` with the order id and
the exact amount shown in the billing history. Your per-refund limit is listed with your
role; a larger refund needs a finance approver outside this system, so open a ticket for it
instead of splitting the amount.

Write down in the ticket what you changed and why, so the next person sees the whole story.
"#;

const FRAUD: &str = r#"
# Fraud investigation

Suspicious activity (logins from new countries, many failed payments, a sudden change of
email and payment method) is investigated before anyone acts. Identify the account with
`lookup_customer`, then call `investigate_account_activity` with the customer id and how many
days back to look. Read the findings: what happened, from where, and how it compares with the
customer's usual behaviour.

Flag an account with `flag_account` only on evidence from an investigation in this session,
with a severity (`low`, `medium`, `high`, `critical`) and a reason that cites the findings.
The gateway refuses a flag that was not preceded by an investigation.

Do not tell the person you are talking to what exactly raised suspicion, and do not accuse
anyone: say the account is under review and that the security team will follow up.
"#;

const ACCOUNT_ADMIN: &str = r#"
# Account administration

Both tools here act on internal login accounts (`U-` followed by four digits) and both are
hard to undo, so act only on a request you can tie to a ticket or a named requester.

`reset_user_password` invalidates the current password and sends the user a reset link.
Use it when a user is locked out or a password may have leaked; tell the user to expect the
link at their registered address.

`delete_user_account` removes the account permanently and needs `confirm: true`. Before you
call it, confirm in plain words with the requester which account goes away and that this
cannot be undone. Never delete an account to "fix" a login problem.
"#;

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::model::{Upstream, UpstreamKind};

    fn catalog() -> crate::model::Catalog {
        let upstream = Upstream {
            name: slug(DEMO_UPSTREAM),
            kind: UpstreamKind::Stdio {
                command: "skillgate".to_owned(),
                args: names(&["demo-upstream"]),
            },
        };
        demo_catalog().into_catalog(vec![upstream])
    }

    #[test]
    fn the_demo_catalog_passes_every_save_check() {
        assert_eq!(catalog().validate(), Ok(()));
    }

    #[test]
    fn each_demo_role_grants_exactly_the_tools_of_the_paper() {
        let catalog = catalog();
        let expected: [(&str, &[&str]); 5] = [
            (
                "tier-1-support",
                &[
                    "lookup_customer",
                    "get_order_history",
                    "check_refund_eligibility",
                    "process_refund",
                    "create_ticket",
                    "escalate_to_billing",
                    "get_response_policy",
                ],
            ),
            (
                "retention-desk",
                &[
                    "lookup_customer",
                    "get_order_history",
                    "create_ticket",
                    "offer_extension",
                    "apply_service_credit",
                    "process_refund",
                ],
            ),
            (
                "billing-admin",
                &[
                    "view_billing_history",
                    "update_payment_method",
                    "process_refund",
                    "lookup_customer",
                ],
            ),
            (
                "security-fraud",
                &[
                    "investigate_account_activity",
                    "flag_account",
                    "lookup_customer",
                ],
            ),
            (
                "system-admin",
                &["reset_user_password", "delete_user_account"],
            ),
        ];
        for (role, tools) in expected {
            let granted = catalog.role_tools(catalog.role(role).unwrap());
            let wanted: BTreeSet<String> = tools.iter().map(|t| (*t).to_owned()).collect();
            assert_eq!(granted, wanted, "{role}");
        }
    }

    #[test]
    fn the_demo_scopes_map_to_the_paper_roles() {
        let catalog = catalog();
        let roles = |scope: &str| -> Vec<&str> {
            catalog
                .scope(scope)
                .unwrap()
                .roles
                .iter()
                .map(Slug::as_str)
                .collect()
        };
        assert_eq!(
            roles("support"),
            ["tier-1-support", "retention-desk", "security-fraud"]
        );
        assert_eq!(roles("billing"), ["billing-admin", "tier-1-support"]);
        assert_eq!(roles("ops"), ["system-admin"]);
    }

    #[test]
    fn tier_1_refund_limits_read_as_sentences() {
        let sentences = catalog().role("tier-1-support").unwrap().limit_sentences();
        assert_eq!(
            sentences,
            [
                "Each call to `process_refund` must have `amount` at most 500.",
                "The `amount` of all allowed `process_refund` calls in a session must add up to at most 1000.",
                "`process_refund` may run only after `check_refund_eligibility` has succeeded earlier in the same session for the same `order_id` with a result whose `/eligible` is true.",
                "`process_refund` needs a reviewer's approval of the exact call before it runs when `amount` is greater than 200; an approval is valid for 15 minutes.",
            ]
        );
    }

    #[test]
    fn the_support_scope_caps_refunds_per_session_under_every_role() {
        let catalog = catalog();
        let support = catalog.scope("support").unwrap();
        assert_eq!(
            support.guardrail_sentences(),
            [
                "The `amount` of all allowed `process_refund` calls in a session must add up to at most 1000."
            ]
        );
        let desk = catalog.role("retention-desk").unwrap().limit_sentences();
        assert!(
            desk.contains(
                &"Each call to `process_refund` must have `amount` at most 500.".to_owned()
            ),
            "{desk:?}"
        );
    }

    #[test]
    fn the_refund_handling_skill_carries_the_refund_policy() {
        let catalog = catalog();
        let skill = &catalog.skill("refund-handling").unwrap().skill;
        let policy = skill
            .resource("refund-policy")
            .expect("refund-policy resource");
        assert!(policy.content.contains("30 days"), "{}", policy.content);
        assert!(
            catalog
                .skills
                .iter()
                .all(|s| s.skill.instructions.split("\n\n").count() >= 3),
            "every skill has several paragraphs"
        );
    }
}
