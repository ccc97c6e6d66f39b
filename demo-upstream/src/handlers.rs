//! What each demo tool does to the company's books, and the JSON it answers with.

use chrono::{DateTime, Duration, Months, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::args::{Args, Cents};
use super::error::ToolError;
use super::fixtures::{Company, Customer, Extension, Flag, Order, Refund, ServiceCredit, Ticket};
use super::policies;

const REFUND_WINDOW_DAYS: i64 = 30;
const MAX_SERVICE_CREDIT: Cents = Cents::dollars(100);
const SERVICE_CREDIT_COOLDOWN_DAYS: i64 = 90;
const EXTENSION_COOLDOWN_DAYS: i64 = 365;

/// Runs one tool against the books. `tool` is one of the served names; `now` is the clock.
pub fn call(
    company: &mut Company,
    tool: &str,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    match tool {
        "lookup_customer" => lookup_customer(company, args, now),
        "get_order_history" => get_order_history(company, args),
        "check_refund_eligibility" => check_refund_eligibility(company, args, now),
        "process_refund" => process_refund(company, args, now),
        "create_ticket" => create_ticket(company, args, now),
        "offer_extension" => offer_extension(company, args, now),
        "apply_service_credit" => apply_service_credit(company, args, now),
        "escalate_to_billing" => escalate_to_billing(company, args, now),
        "get_response_policy" => policies::lookup(args.str("topic")?),
        "view_billing_history" => view_billing_history(company, args, now),
        "update_payment_method" => update_payment_method(company, args, now),
        "investigate_account_activity" => investigate_account_activity(company, args, now),
        "flag_account" => flag_account(company, args, now),
        "reset_user_password" => reset_user_password(company, args, now),
        "delete_user_account" => delete_user_account(company, args, now),
        other => Err(ToolError::UnknownTool(other.to_owned())),
    }
}

fn lookup_customer(
    company: &Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let id = args.opt_str("customer_id")?;
    let email = args.opt_str("email")?;
    let customer = match (id, email) {
        (None, None) => {
            return Err(ToolError::invalid(
                "lookup_customer needs a customer_id or an email",
            ));
        }
        (Some(id), _) => customer(company, id)?,
        (None, Some(email)) => company
            .customers
            .iter()
            .find(|c| c.email.eq_ignore_ascii_case(email))
            .ok_or_else(|| ToolError::CustomerNotFound(format!("email {email}")))?,
    };
    if let (Some(_), Some(email)) = (id, email)
        && !customer.email.eq_ignore_ascii_case(email)
    {
        return Err(ToolError::CustomerNotFound(format!(
            "id {} and email {email}",
            customer.id
        )));
    }
    let open_tickets: Vec<Value> = company
        .tickets
        .iter()
        .filter(|t| t.customer_id == customer.id)
        .map(|t| json!({"ticket_id": t.id, "kind": t.kind, "subject": t.subject, "priority": t.priority, "opened_at": timestamp(t.at)}))
        .collect();
    let flags: Vec<Value> = company
        .flags
        .iter()
        .filter(|f| f.customer_id == customer.id)
        .map(|f| json!({"flag_id": f.id, "severity": f.severity, "flagged_at": timestamp(f.at)}))
        .collect();
    Ok(json!({
        "customer_id": customer.id,
        "user_id": customer.user_id,
        "name": customer.name,
        "email": customer.email,
        "plan": customer.plan,
        "monthly_price": customer.monthly_price.to_json(),
        "customer_since": date(customer.customer_since),
        "tenure_months": months_between(customer.customer_since, now),
        "renews_on": date(customer.renews_on),
        "account_status": customer.status,
        "payment_method": customer.payment_method,
        "open_tickets": open_tickets,
        "security_flags": flags,
    }))
}

fn get_order_history(company: &Company, args: &Args<'_>) -> Result<Value, ToolError> {
    let customer = customer(company, args.str("customer_id")?)?;
    let orders: Vec<Value> = company
        .orders
        .iter()
        .filter(|o| o.customer_id == customer.id)
        .map(|o| {
            json!({
                "order_id": o.id,
                "placed_on": date(o.placed_at),
                "amount": o.total.to_json(),
                "status": o.status,
                "items": o.items,
                "refunded_amount": o.refunded.to_json(),
            })
        })
        .collect();
    Ok(json!({ "customer_id": customer.id, "orders": orders }))
}

/// Why an order cannot be refunded, if it cannot; and how much of it still can be.
fn refund_assessment(
    order: &Order,
    customer: &Customer,
    now: DateTime<Utc>,
) -> (Cents, Vec<String>) {
    let mut reasons = Vec::new();
    let age = (now - order.placed_at).num_days();
    if age > REFUND_WINDOW_DAYS {
        reasons.push(format!(
            "order {} was placed {age} days ago; refunds are possible within {REFUND_WINDOW_DAYS} days",
            order.id
        ));
    }
    if order.status == "cancelled" {
        reasons.push(format!(
            "order {} was cancelled and never charged",
            order.id
        ));
    }
    let refundable = order.total - order.refunded;
    if refundable <= Cents(0) && order.status != "cancelled" {
        reasons.push(format!(
            "order {} has already been refunded in full",
            order.id
        ));
    }
    if customer.status == "past_due" {
        reasons.push(format!(
            "account {} is past due; settle the open invoice first",
            customer.id
        ));
    }
    let refundable = if reasons.is_empty() {
        refundable
    } else {
        Cents(0)
    };
    (refundable, reasons)
}

fn check_refund_eligibility(
    company: &Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let customer = customer(company, args.str("customer_id")?)?;
    let order = order(company, customer.id, args.str("order_id")?)?;
    let (refundable, reasons) = refund_assessment(order, customer, now);
    Ok(json!({
        "customer_id": customer.id,
        "order_id": order.id,
        "eligible": reasons.is_empty(),
        "order_amount": order.total.to_json(),
        "already_refunded": order.refunded.to_json(),
        "refundable_amount": refundable.to_json(),
        "refund_window_ends": date(order.placed_at + Duration::days(REFUND_WINDOW_DAYS)),
        "reasons": reasons,
    }))
}

fn process_refund(
    company: &mut Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let customer = customer(company, args.str("customer_id")?)?;
    let order = order(company, customer.id, args.str("order_id")?)?;
    let amount = args.money("amount")?;
    let reason = args.str("reason")?;
    let (refundable, reasons) = refund_assessment(order, customer, now);
    if !reasons.is_empty() {
        return Err(ToolError::NotEligible(reasons.join("; ")));
    }
    if amount > refundable {
        return Err(ToolError::NotEligible(format!(
            "{amount} exceeds the refundable amount of order {}, {refundable}",
            order.id
        )));
    }
    let (customer_id, order_id) = (customer.id, order.id);
    let refunded_to = customer.payment_method.clone();
    let id = company.next_id("R");
    company.refunds.push(Refund {
        id: id.clone(),
        customer_id: customer_id.to_owned(),
        order_id: order_id.to_owned(),
        amount,
        reason: reason.to_owned(),
        at: now,
    });
    if let Some(order) = company.orders.iter_mut().find(|o| o.id == order_id) {
        order.refunded = order.refunded + amount;
        if order.refunded == order.total {
            order.status = "refunded";
        }
    }
    Ok(json!({
        "refund_id": id,
        "customer_id": customer_id,
        "order_id": order_id,
        "amount": amount.to_json(),
        "currency": "USD",
        "status": "processed",
        "refunded_to": refunded_to,
        "reason": reason,
        "processed_at": timestamp(now),
        "expected_arrival": date(now + Duration::days(5)),
    }))
}

fn create_ticket(
    company: &mut Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let customer_id = customer(company, args.str("customer_id")?)?.id;
    let subject = args.str("subject")?;
    args.str("description")?;
    let priority = args.one_of("priority", &["low", "normal", "high", "urgent"])?;
    let id = company.next_id("T");
    company.tickets.push(Ticket {
        id: id.clone(),
        customer_id: customer_id.to_owned(),
        subject: subject.to_owned(),
        priority: priority.to_owned(),
        kind: "support",
        at: now,
    });
    let first_response_hours = match priority {
        "urgent" => 1,
        "high" => 4,
        "normal" => 24,
        _ => 72,
    };
    Ok(json!({
        "ticket_id": id,
        "customer_id": customer_id,
        "subject": subject,
        "priority": priority,
        "status": "open",
        "created_at": timestamp(now),
        "first_response_due": timestamp(now + Duration::hours(first_response_hours)),
    }))
}

fn offer_extension(
    company: &mut Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let customer_id = customer(company, args.str("customer_id")?)?.id;
    let months = args.int_in("months", 1, 3)?;
    if let Some(previous) = company
        .extensions
        .iter()
        .find(|x| x.customer_id == customer_id && (now - x.at).num_days() < EXTENSION_COOLDOWN_DAYS)
    {
        return Err(ToolError::NotEligible(format!(
            "{customer_id} already received an extension on {}; one extension per {EXTENSION_COOLDOWN_DAYS} days",
            date(previous.at)
        )));
    }
    let id = company.next_id("X");
    company.extensions.push(Extension {
        id: id.clone(),
        customer_id: customer_id.to_owned(),
        months,
        at: now,
    });
    let customer = company
        .customers
        .iter_mut()
        .find(|c| c.id == customer_id)
        .ok_or_else(|| ToolError::CustomerNotFound(format!("id {customer_id}")))?;
    let previous_renewal = customer.renews_on;
    let added = Months::new(u32::try_from(months).unwrap_or(1));
    customer.renews_on = previous_renewal
        .checked_add_months(added)
        .unwrap_or(previous_renewal);
    Ok(json!({
        "extension_id": id,
        "customer_id": customer_id,
        "months": months,
        "previous_renewal": date(previous_renewal),
        "new_renewal": date(customer.renews_on),
        "charge": Cents(0).to_json(),
    }))
}

fn apply_service_credit(
    company: &mut Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let customer = customer(company, args.str("customer_id")?)?;
    let (customer_id, next_invoice) = (customer.id, customer.renews_on);
    let amount = args.money("amount")?;
    if amount > MAX_SERVICE_CREDIT {
        return Err(ToolError::ServiceCreditDeclined(format!(
            "{amount} exceeds the {MAX_SERVICE_CREDIT} maximum per credit"
        )));
    }
    if let Some(recent) = company.credits.iter().find(|c| {
        c.customer_id == customer_id && (now - c.at).num_days() < SERVICE_CREDIT_COOLDOWN_DAYS
    }) {
        return Err(ToolError::ServiceCreditDeclined(format!(
            "{customer_id} already received a credit of {} on {} ({}); one credit per {SERVICE_CREDIT_COOLDOWN_DAYS} days",
            recent.amount,
            date(recent.at),
            recent.id
        )));
    }
    let id = company.next_id("SC");
    company.credits.push(ServiceCredit {
        id: id.clone(),
        customer_id: customer_id.to_owned(),
        amount,
        at: now,
    });
    Ok(json!({
        "credit_id": id,
        "customer_id": customer_id,
        "amount": amount.to_json(),
        "currency": "USD",
        "status": "applied",
        "applies_to_invoice_on": date(next_invoice),
        "applied_at": timestamp(now),
    }))
}

fn escalate_to_billing(
    company: &mut Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let customer_id = customer(company, args.str("customer_id")?)?.id;
    let summary = args.str("summary")?;
    let id = company.next_id("ESC");
    company.tickets.push(Ticket {
        id: id.clone(),
        customer_id: customer_id.to_owned(),
        subject: summary.to_owned(),
        priority: String::from("high"),
        kind: "billing_escalation",
        at: now,
    });
    Ok(json!({
        "escalation_id": id,
        "customer_id": customer_id,
        "queue": "billing",
        "status": "queued",
        "created_at": timestamp(now),
        "response_due": timestamp(now + Duration::hours(24)),
    }))
}

fn view_billing_history(
    company: &Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let customer = customer(company, args.str("customer_id")?)?;
    let tenure = months_between(customer.customer_since, now).clamp(1, 6);
    let invoices: Vec<Value> = (0..tenure)
        .map(|k| {
            let issued = customer
                .renews_on
                .checked_sub_months(Months::new(u32::try_from(k + 1).unwrap_or(1)))
                .unwrap_or(customer.renews_on);
            let overdue = customer.status == "past_due" && k == 0;
            json!({
                "invoice_id": format!("INV-{}-{:02}", &customer.id[2..], tenure - k),
                "issued_on": date(issued),
                "amount": customer.monthly_price.to_json(),
                "status": if overdue { "past_due" } else { "paid" },
            })
        })
        .collect();
    let refunds: Vec<Value> = company
        .refunds
        .iter()
        .filter(|r| r.customer_id == customer.id)
        .map(|r| json!({"refund_id": r.id, "order_id": r.order_id, "amount": r.amount.to_json(), "on": date(r.at), "reason": r.reason}))
        .collect();
    let credits: Vec<Value> = company
        .credits
        .iter()
        .filter(|c| c.customer_id == customer.id)
        .map(|c| json!({"credit_id": c.id, "amount": c.amount.to_json(), "on": date(c.at)}))
        .collect();
    let extensions: Vec<Value> = company
        .extensions
        .iter()
        .filter(|x| x.customer_id == customer.id)
        .map(|x| json!({"extension_id": x.id, "months": x.months, "on": date(x.at)}))
        .collect();
    Ok(json!({
        "customer_id": customer.id,
        "plan": customer.plan,
        "payment_method": customer.payment_method,
        "invoices": invoices,
        "refunds": refunds,
        "service_credits": credits,
        "extensions": extensions,
    }))
}

fn update_payment_method(
    company: &mut Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let customer_id = customer(company, args.str("customer_id")?)?.id;
    let token = args.str("token")?;
    // The token is a secret: no error or result may contain it, only its last four characters.
    if !token.starts_with("tok_") || token.chars().count() < 8 || !token.is_ascii() {
        return Err(ToolError::invalid(
            "token must be a payment processor token (tok_..., at least 8 characters)",
        ));
    }
    let last4 = &token[token.len() - 4..];
    let masked = format!("tok_****{last4}");
    let customer = company
        .customers
        .iter_mut()
        .find(|c| c.id == customer_id)
        .ok_or_else(|| ToolError::CustomerNotFound(format!("id {customer_id}")))?;
    let previous = std::mem::replace(
        &mut customer.payment_method,
        format!("card token ending {last4}"),
    );
    Ok(json!({
        "customer_id": customer_id,
        "status": "updated",
        "previous_payment_method": previous,
        "payment_method": customer.payment_method,
        "token": masked,
        "updated_at": timestamp(now),
    }))
}

fn investigate_account_activity(
    company: &Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let customer = customer(company, args.str("customer_id")?)?;
    let days = args.int_in("days", 1, 365)?;
    let since = now - Duration::days(days);
    let events: Vec<_> = company
        .activity
        .iter()
        .filter(|e| e.customer_id == customer.id && e.at >= since)
        .collect();
    let findings: Vec<&str> = events
        .iter()
        .filter(|e| e.suspicious)
        .map(|e| e.detail)
        .collect();
    let risk_level = match findings.len() {
        0 => "low",
        1 => "medium",
        _ => "high",
    };
    let events: Vec<Value> = events
        .iter()
        .map(|e| json!({"at": timestamp(e.at), "kind": e.kind, "detail": e.detail, "suspicious": e.suspicious}))
        .collect();
    Ok(json!({
        "customer_id": customer.id,
        "window_days": days,
        "events": events,
        "findings": findings,
        "risk_level": risk_level,
    }))
}

fn flag_account(
    company: &mut Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let customer_id = customer(company, args.str("customer_id")?)?.id;
    let reason = args.str("reason")?;
    let severity = args.one_of("severity", &["low", "medium", "high", "critical"])?;
    let id = company.next_id("F");
    company.flags.push(Flag {
        id: id.clone(),
        customer_id: customer_id.to_owned(),
        severity: severity.to_owned(),
        at: now,
    });
    let review = if matches!(severity, "high" | "critical") {
        "security team notified; review within 4 hours"
    } else {
        "queued for the weekly security review"
    };
    Ok(json!({
        "flag_id": id,
        "customer_id": customer_id,
        "severity": severity,
        "reason": reason,
        "review": review,
        "flagged_at": timestamp(now),
    }))
}

fn reset_user_password(
    company: &mut Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let user_id = args.str("user_id")?;
    let customer = user(company, user_id)?;
    let sent_to = mask_email(customer.email);
    let id = company.next_id("PR");
    Ok(json!({
        "reset_id": id,
        "user_id": user_id,
        "reset_link_sent_to": sent_to,
        "link_expires_at": timestamp(now + Duration::hours(1)),
        "sessions_revoked": true,
    }))
}

fn delete_user_account(
    company: &mut Company,
    args: &Args<'_>,
    now: DateTime<Utc>,
) -> Result<Value, ToolError> {
    let user_id = args.str("user_id")?;
    let confirm = args.bool("confirm")?;
    let customer_id = user(company, user_id)?.id;
    if !confirm {
        return Err(ToolError::ConfirmationRequired(user_id.to_owned()));
    }
    company.deleted_users.push(user_id.to_owned());
    let id = company.next_id("DEL");
    Ok(json!({
        "deletion_id": id,
        "user_id": user_id,
        "customer_id": customer_id,
        "status": "deleted",
        "deleted_at": timestamp(now),
        "data_purged_by": date(now + Duration::days(30)),
    }))
}

fn customer<'c>(company: &'c Company, id: &str) -> Result<&'c Customer, ToolError> {
    company
        .customers
        .iter()
        .find(|c| c.id == id)
        .ok_or_else(|| ToolError::CustomerNotFound(format!("id {id}")))
}

fn order<'c>(company: &'c Company, customer_id: &str, id: &str) -> Result<&'c Order, ToolError> {
    company
        .orders
        .iter()
        .find(|o| o.id == id && o.customer_id == customer_id)
        .ok_or_else(|| ToolError::OrderNotFound {
            customer_id: customer_id.to_owned(),
            order_id: id.to_owned(),
        })
}

fn user<'c>(company: &'c Company, user_id: &str) -> Result<&'c Customer, ToolError> {
    if !company.user_exists(user_id) {
        return Err(ToolError::UserNotFound(user_id.to_owned()));
    }
    company
        .customers
        .iter()
        .find(|c| c.user_id == user_id)
        .ok_or_else(|| ToolError::UserNotFound(user_id.to_owned()))
}

fn mask_email(email: &str) -> String {
    match email.split_once('@') {
        Some((local, domain)) => {
            let first: String = local.chars().take(1).collect();
            format!("{first}***@{domain}")
        }
        None => String::from("***"),
    }
}

fn months_between(from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
    (to - from).num_days() / 30
}

fn date(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d").to_string()
}

fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}
