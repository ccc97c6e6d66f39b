//! The demo company's books: customers, orders and their history, seeded in memory.
//!
//! Dates are relative to the moment the upstream starts, so an order that is inside the
//! 30-day refund window today is still inside it whenever the demo runs.

use chrono::{DateTime, Duration, Utc};

use super::args::Cents;

#[derive(Debug, Clone)]
pub struct Customer {
    pub id: &'static str,
    pub user_id: &'static str,
    pub name: &'static str,
    pub email: &'static str,
    pub plan: &'static str,
    pub monthly_price: Cents,
    pub customer_since: DateTime<Utc>,
    pub renews_on: DateTime<Utc>,
    pub status: &'static str,
    pub payment_method: String,
}

#[derive(Debug, Clone)]
pub struct Order {
    pub id: &'static str,
    pub customer_id: &'static str,
    pub placed_at: DateTime<Utc>,
    pub total: Cents,
    pub status: &'static str,
    pub items: &'static [&'static str],
    pub refunded: Cents,
}

#[derive(Debug, Clone)]
pub struct Refund {
    pub id: String,
    pub customer_id: String,
    pub order_id: String,
    pub amount: Cents,
    pub reason: String,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct ServiceCredit {
    pub id: String,
    pub customer_id: String,
    pub amount: Cents,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct Extension {
    pub id: String,
    pub customer_id: String,
    pub months: i64,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct Ticket {
    pub id: String,
    pub customer_id: String,
    pub subject: String,
    pub priority: String,
    pub kind: &'static str,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct ActivityEvent {
    pub customer_id: &'static str,
    pub at: DateTime<Utc>,
    pub kind: &'static str,
    pub detail: &'static str,
    pub suspicious: bool,
}

#[derive(Debug, Clone)]
pub struct Flag {
    pub id: String,
    pub customer_id: String,
    pub severity: String,
    pub at: DateTime<Utc>,
}

/// Everything the demo tools read and change.
#[derive(Debug)]
pub struct Company {
    pub customers: Vec<Customer>,
    pub orders: Vec<Order>,
    pub refunds: Vec<Refund>,
    pub credits: Vec<ServiceCredit>,
    pub extensions: Vec<Extension>,
    pub tickets: Vec<Ticket>,
    pub activity: Vec<ActivityEvent>,
    pub flags: Vec<Flag>,
    pub deleted_users: Vec<String>,
    next_id: u32,
}

impl Company {
    pub fn seeded(now: DateTime<Utc>) -> Self {
        let ago = |days: i64| now - Duration::days(days);
        Self {
            customers: customers(now),
            orders: orders(now),
            refunds: vec![Refund {
                id: String::from("R-6990"),
                customer_id: String::from("C-1003"),
                order_id: String::from("O-5006"),
                amount: Cents(45000),
                reason: String::from("Workshop cancelled by us"),
                at: ago(18),
            }],
            credits: vec![ServiceCredit {
                id: String::from("SC-3990"),
                customer_id: String::from("C-1004"),
                amount: Cents::dollars(25),
                at: ago(30),
            }],
            extensions: vec![Extension {
                id: String::from("X-4990"),
                customer_id: String::from("C-1002"),
                months: 1,
                at: ago(60),
            }],
            tickets: Vec::new(),
            activity: activity(now),
            flags: Vec::new(),
            deleted_users: Vec::new(),
            next_id: 1,
        }
    }

    /// A fresh id such as `T-9001`; one counter for all kinds keeps ids unique in a run.
    pub fn next_id(&mut self, prefix: &str) -> String {
        let id = format!("{prefix}-{}", 9000 + self.next_id);
        self.next_id += 1;
        id
    }

    pub fn user_exists(&self, user_id: &str) -> bool {
        self.customers.iter().any(|c| c.user_id == user_id)
            && !self.deleted_users.iter().any(|u| u == user_id)
    }
}

const PRO: Cents = Cents(4900);
const BASIC: Cents = Cents(1900);
const ENTERPRISE: Cents = Cents(29900);

/// Customer rows: customer since (days ago), renewal (days ahead; negative is overdue).
#[rustfmt::skip]
fn customers(now: DateTime<Utc>) -> Vec<Customer> {
    let row = |id, user_id, name, email, plan, monthly_price, since: i64, renews: i64, status, card: &str| Customer {
        id, user_id, name, email, plan, monthly_price,
        customer_since: now - Duration::days(since),
        renews_on: now + Duration::days(renews),
        status,
        payment_method: card.to_owned(),
    };
    vec![
        row("C-1001", "U-2001", "Maria Alvarez", "maria.alvarez@example.com", "pro", PRO, 790, 18, "active", "visa ending 4242"),
        row("C-1002", "U-2002", "James Chen", "james.chen@example.com", "basic", BASIC, 245, 5, "active", "mastercard ending 5454"),
        row("C-1003", "U-2003", "Priya Raman", "priya.raman@example.com", "enterprise", ENTERPRISE, 1460, 27, "active", "amex ending 0005"),
        row("C-1004", "U-2004", "Tom Becker", "tom.becker@example.com", "pro", PRO, 425, 9, "active", "visa ending 1881"),
        row("C-1005", "U-2005", "Aisha Okafor", "aisha.okafor@example.com", "basic", BASIC, 95, -4, "past_due", "visa ending 0341"),
        row("C-1006", "U-2006", "Lukas Novak", "lukas.novak@example.com", "pro", PRO, 580, 14, "active", "mastercard ending 4444"),
        row("C-1007", "U-2007", "Sofia Rossi", "sofia.rossi@example.com", "basic", BASIC, 34, 26, "active", "visa ending 9424"),
        row("C-1008", "U-2008", "Daniel Kim", "daniel.kim@example.com", "enterprise", ENTERPRISE, 1830, 3, "active", "amex ending 8431"),
    ]
}

/// Order rows: placed (days ago), total in cents.
#[rustfmt::skip]
fn orders(now: DateTime<Utc>) -> Vec<Order> {
    let row = |id, customer_id, ago: i64, total: i64, status, items| Order {
        id, customer_id, status, items,
        placed_at: now - Duration::days(ago),
        total: Cents(total),
        refunded: if status == "refunded" { Cents(total) } else { Cents(0) },
    };
    vec![
        row("O-5001", "C-1001", 12, 12900, "delivered", &["Annual analytics add-on"]),
        row("O-5002", "C-1001", 75, 4999, "delivered", &["Extra seat pack"]),
        row("O-5003", "C-1002", 5, 1999, "delivered", &["Storage upgrade, 100 GB"]),
        row("O-5004", "C-1002", 35, 1999, "delivered", &["Storage upgrade, 100 GB"]),
        row("O-5005", "C-1003", 10, 120000, "delivered", &["Premium support, 12 months"]),
        row("O-5006", "C-1003", 20, 45000, "refunded", &["Onboarding workshop"]),
        row("O-5007", "C-1004", 3, 8900, "delivered", &["Data export service"]),
        row("O-5008", "C-1005", 15, 2999, "delivered", &["Template bundle"]),
        row("O-5009", "C-1006", 8, 24900, "delivered", &["Security audit report"]),
        row("O-5010", "C-1007", 2, 999, "delivered", &["Custom domain"]),
        row("O-5011", "C-1008", 25, 240000, "delivered", &["SSO integration", "Dedicated instance setup"]),
        row("O-5012", "C-1005", 40, 5900, "delivered", &["Priority support, 1 month"]),
        row("O-5013", "C-1007", 6, 1499, "cancelled", &["Extra seat pack"]),
    ]
}

/// Account activity rows: when (days ago), kind, detail, whether it is suspicious.
#[rustfmt::skip]
fn activity(now: DateTime<Utc>) -> Vec<ActivityEvent> {
    let row = |customer_id, ago: i64, kind, detail, suspicious| ActivityEvent {
        customer_id, kind, detail, suspicious,
        at: now - Duration::days(ago),
    };
    vec![
        row("C-1001", 1, "login", "Login from Madrid, ES (known device)", false),
        row("C-1002", 4, "login", "Login from Toronto, CA (known device)", false),
        row("C-1003", 2, "login", "Login from Bangalore, IN (known device)", false),
        row("C-1004", 6, "login", "Login from Berlin, DE (known device)", false),
        row("C-1006", 20, "login", "Login from Prague, CZ (known device)", false),
        row("C-1006", 3, "login", "Login from Lagos, NG (new device, new country)", true),
        row("C-1006", 2, "password_reset_failed", "3 failed password reset attempts in 10 minutes", true),
        row("C-1006", 1, "email_change_requested", "Change of login email to an address at a new domain", true),
        row("C-1006", 1, "payment_method_change_attempt", "Card change attempt declined by the processor", true),
        row("C-1007", 1, "login", "Login from Milan, IT (known device)", false),
        row("C-1008", 40, "api_key_created", "API key created from an unrecognised IP range", true),
        row("C-1008", 5, "login", "Login from Seoul, KR (known device)", false),
    ]
}
