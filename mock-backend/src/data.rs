//! Deterministic data sets: contacts to search and invoices to fetch.
//!
//! Both are pure functions of the configured sizes and seed, so two backends started with the
//! same flags answer byte-for-byte the same, and tests can assert on exact records.

use std::io::Write as _;

use rand::{RngExt, SeedableRng, rngs::Xoshiro256PlusPlus};
use serde::{Deserialize, Serialize};

/// One entry of the contacts data set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contact {
    pub id: u64,
    pub name: String,
    pub email: String,
    pub phone: String,
    pub company: String,
}

/// The ten users of the classic JSONPlaceholder data set: people who have written MCP demo tools
/// against it will recognise them, and "Leanne Graham" is the name tests look for.
const CLASSIC: [(&str, &str, &str, &str); 10] = [
    (
        "Leanne Graham",
        "Sincere@april.biz",
        "1-770-736-8031 x56442",
        "Romaguera-Crona",
    ),
    (
        "Ervin Howell",
        "Shanna@melissa.tv",
        "010-692-6593 x09125",
        "Deckow-Crist",
    ),
    (
        "Clementine Bauch",
        "Nathan@yesenia.net",
        "1-463-123-4447",
        "Romaguera-Jacobson",
    ),
    (
        "Patricia Lebsack",
        "Julianne.OConner@kory.org",
        "493-170-9623 x156",
        "Robel-Corkery",
    ),
    (
        "Chelsey Dietrich",
        "Lucio_Hettinger@annie.ca",
        "(254)954-1289",
        "Keebler LLC",
    ),
    (
        "Dennis Schulist",
        "Karley_Dach@jasper.info",
        "1-477-935-8478 x6430",
        "Considine-Lockman",
    ),
    (
        "Kurtis Weissnat",
        "Telly.Hoeger@billy.biz",
        "210.067.6132",
        "Johns Group",
    ),
    (
        "Nicholas Runolfsdottir V",
        "Sherwood@rosamond.me",
        "586.493.6943 x140",
        "Abernathy Group",
    ),
    (
        "Glenna Reichert",
        "Chaim_McDermott@dana.io",
        "(775)976-6794 x41206",
        "Yost and Sons",
    ),
    (
        "Clementina DuBuque",
        "Rey.Padberg@karina.biz",
        "024-648-3804",
        "Hoeger LLC",
    ),
];

// None of the generated names contains "leanne" or "graham", so a search for the classic name
// has exactly one hit whatever the size and seed.
const FIRST_NAMES: [&str; 30] = [
    "Aaliyah", "Bernard", "Camila", "Darius", "Elena", "Felix", "Greta", "Hugo", "Ines", "Jonas",
    "Keira", "Liam", "Mara", "Nolan", "Olivia", "Pavel", "Quinn", "Rosa", "Soren", "Tamsin",
    "Umar", "Vera", "Wes", "Ximena", "Yusuf", "Zoe", "Adele", "Bruno", "Celine", "Dmitri",
];

const LAST_NAMES: [&str; 30] = [
    "Abbott", "Barton", "Crist", "Dach", "Ebert", "Feeney", "Gislason", "Hackett", "Jast", "Kuhn",
    "Larkin", "Mertz", "Nader", "Okuneva", "Pouros", "Quigley", "Rempel", "Schaden", "Torp",
    "Upton", "Volkman", "Waelchi", "Yundt", "Zieme", "Bode", "Conn", "Davis", "Ernser", "Frami",
    "Goyette",
];

const COMPANY_SUFFIXES: [&str; 4] = ["LLC", "Group", "and Sons", "Inc"];
const DOMAINS: [&str; 4] = ["example.com", "example.net", "example.org", "mail.test"];

/// Builds the contacts data set: the classic ten first, then `n - 10` generated from `seed`.
pub fn contacts(n: usize, seed: u64) -> Vec<Contact> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (1..=n as u64)
        .map(|id| match CLASSIC.get(id as usize - 1) {
            Some(&(name, email, phone, company)) => Contact {
                id,
                name: name.to_owned(),
                email: email.to_owned(),
                phone: phone.to_owned(),
                company: company.to_owned(),
            },
            None => generated_contact(id, &mut rng),
        })
        .collect()
}

fn generated_contact(id: u64, rng: &mut Xoshiro256PlusPlus) -> Contact {
    let first = pick(rng, &FIRST_NAMES);
    let last = pick(rng, &LAST_NAMES);
    let company = if rng.random_bool(0.5) {
        format!(
            "{} {}",
            pick(rng, &LAST_NAMES),
            pick(rng, &COMPANY_SUFFIXES)
        )
    } else {
        format!("{}-{}", pick(rng, &LAST_NAMES), pick(rng, &LAST_NAMES))
    };
    Contact {
        id,
        name: format!("{first} {last}"),
        email: format!(
            "{}.{}{id}@{}",
            first.to_lowercase(),
            last.to_lowercase(),
            pick(rng, &DOMAINS)
        ),
        phone: format!(
            "1-{:03}-{:03}-{:04}",
            rng.random_range(200..1000),
            rng.random_range(100..1000),
            rng.random_range(0..10_000)
        ),
        company,
    }
}

fn pick<'a>(rng: &mut Xoshiro256PlusPlus, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

/// The contacts, prepared for searching: lowercase text to match and the JSON to answer with,
/// both computed once so a search allocates nothing but its response.
#[derive(Debug)]
pub struct ContactIndex {
    entries: Box<[IndexEntry]>,
}

#[derive(Debug)]
struct IndexEntry {
    /// Lowercase `name`, `email` and `company`, newline-separated.
    haystack: Box<str>,
    /// The contact rendered as a JSON object.
    json: Box<str>,
}

impl ContactIndex {
    /// Pre-renders every contact.
    pub fn new(contacts: &[Contact]) -> Self {
        let entries = contacts
            .iter()
            .map(|c| IndexEntry {
                haystack: format!("{}\n{}\n{}", c.name, c.email, c.company)
                    .to_lowercase()
                    .into(),
                json: serde_json::to_string(c)
                    .unwrap_or_else(|_| String::from("{}"))
                    .into(),
            })
            .collect();
        ContactIndex { entries }
    }

    /// Number of contacts.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the data set is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Case-insensitive substring search over name, email and company; `None` matches all.
    ///
    /// Renders `{"query": q, "total": matches, "results": [first `limit` matches]}` straight
    /// from the pre-rendered entries.
    pub fn search_json(&self, query: Option<&str>, limit: usize) -> Vec<u8> {
        let needle = query.map(str::to_lowercase).unwrap_or_default();
        let mut out = Vec::with_capacity(64 + limit.min(self.entries.len()) * 160);
        out.extend_from_slice(b"{\"query\":");
        // Serializing a string or null into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, &query);
        let mut total = 0usize;
        let mut results = Vec::with_capacity(limit.min(self.entries.len()) * 160);
        for entry in self
            .entries
            .iter()
            .filter(|e| e.haystack.contains(&*needle))
        {
            if total < limit {
                if total > 0 {
                    results.push(b',');
                }
                results.extend_from_slice(entry.json.as_bytes());
            }
            total += 1;
        }
        let _ = write!(out, ",\"total\":{total},\"results\":[");
        out.extend_from_slice(&results);
        out.extend_from_slice(b"]}");
        out
    }
}

/// One invoice line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvoiceLine {
    pub description: String,
    pub quantity: u32,
    pub unit_cents: u64,
}

/// An invoice, as `GET /invoices/{id}` returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invoice {
    pub id: u64,
    pub customer: String,
    /// Sum of `quantity * unit_cents` over the lines.
    pub amount_cents: u64,
    pub currency: String,
    pub status: String,
    /// ISO date, `YYYY-MM-DD`.
    pub issued: String,
    pub lines: Vec<InvoiceLine>,
}

const PRODUCTS: [&str; 8] = [
    "API gateway subscription",
    "Support plan",
    "Consulting hours",
    "Storage (TB-month)",
    "Load balancer",
    "Onboarding workshop",
    "Priority incident response",
    "Data export",
];
const CURRENCIES: [&str; 3] = ["USD", "EUR", "GBP"];
const STATUSES: [&str; 4] = ["paid", "open", "overdue", "void"];

/// Generates invoice `id` from `seed`.
///
/// Generated on demand rather than stored: rendering one is cheaper than the JSON it becomes,
/// and the data set can be huge without costing memory.
pub fn invoice(id: u64, seed: u64) -> Invoice {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let lines: Vec<InvoiceLine> = (0..rng.random_range(1..=4))
        .map(|_| InvoiceLine {
            description: pick(&mut rng, &PRODUCTS).to_owned(),
            quantity: rng.random_range(1..=20),
            unit_cents: rng.random_range(100..=50_000),
        })
        .collect();
    Invoice {
        id,
        customer: format!(
            "{} {}",
            pick(&mut rng, &FIRST_NAMES),
            pick(&mut rng, &LAST_NAMES)
        ),
        amount_cents: lines
            .iter()
            .map(|l| u64::from(l.quantity) * l.unit_cents)
            .sum(),
        currency: pick(&mut rng, &CURRENCIES).to_owned(),
        status: pick(&mut rng, &STATUSES).to_owned(),
        issued: format!(
            "{}-{:02}-{:02}",
            rng.random_range(2023..=2025),
            rng.random_range(1..=12),
            rng.random_range(1..=28)
        ),
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_with_the_classic_ten() {
        let set = contacts(1000, 42);
        assert_eq!(set.len(), 1000);
        assert_eq!(set[0].name, "Leanne Graham");
        assert_eq!(set[9].name, "Clementina DuBuque");
        assert!(set.iter().enumerate().all(|(i, c)| c.id == i as u64 + 1));
    }

    #[test]
    fn is_deterministic_for_a_seed() {
        assert_eq!(contacts(500, 7), contacts(500, 7));
        assert_ne!(contacts(500, 7)[10..], contacts(500, 8)[10..]);
        // A smaller set is a prefix of a larger one: sizes do not reshuffle records.
        assert_eq!(contacts(50, 7)[..], contacts(500, 7)[..50]);
    }

    #[test]
    fn small_sets_truncate_the_classics() {
        let set = contacts(3, 1);
        assert_eq!(set.len(), 3);
        assert_eq!(set[2].name, "Clementine Bauch");
        assert!(contacts(0, 1).is_empty());
    }

    fn search(index: &ContactIndex, q: Option<&str>, limit: usize) -> serde_json::Value {
        serde_json::from_slice(&index.search_json(q, limit)).expect("valid JSON")
    }

    #[test]
    fn search_is_case_insensitive_and_counts_all_matches() {
        let index = ContactIndex::new(&contacts(1000, 42));
        let v = search(&index, Some("LEANNE"), 10);
        assert_eq!(v["query"], "LEANNE");
        assert_eq!(v["total"], 1);
        assert_eq!(v["results"][0]["name"], "Leanne Graham");
        assert_eq!(v["results"][0]["company"], "Romaguera-Crona");

        // Matches on company too, and `total` counts past the limit.
        let v = search(&index, Some("romaguera"), 1);
        assert_eq!(v["total"], 2);
        assert_eq!(v["results"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn search_without_query_lists_everything_limited() {
        let index = ContactIndex::new(&contacts(25, 42));
        let v = search(&index, None, 10);
        assert_eq!(v["query"], serde_json::Value::Null);
        assert_eq!(v["total"], 25);
        assert_eq!(v["results"].as_array().map(Vec::len), Some(10));
        let v = search(&index, Some("no such person"), 10);
        assert_eq!(v["total"], 0);
        assert_eq!(v["results"], serde_json::json!([]));
    }

    #[test]
    fn invoices_are_deterministic_and_consistent() {
        let a = invoice(17, 42);
        assert_eq!(a, invoice(17, 42));
        assert_ne!(a, invoice(18, 42));
        assert_eq!(a.id, 17);
        assert!(!a.lines.is_empty());
        let sum: u64 = a
            .lines
            .iter()
            .map(|l| u64::from(l.quantity) * l.unit_cents)
            .sum();
        assert_eq!(a.amount_cents, sum);
        assert_eq!(a.issued.len(), 10);
    }
}
