"""Shared pieces of the guardrail evaluation corpus generator: seeded randomness, the case
record, and the rule that puts a family of cases in the held-out split.

Nothing here knows what the detectors match: the cases are written from the published
formats and taxonomies named in README.md, never from the detectors' patterns.
"""
import base64
import hashlib
import json
import random
import string
import uuid

RNG = random.Random(50)

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
LOWER_DIGITS = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B64 = string.ascii_letters + string.digits + "+/"
B64URL = string.ascii_letters + string.digits + "-_"
BASE32 = string.ascii_uppercase + "234567"

FIRST = ["Maria", "James", "Priya", "Tom", "Aisha", "Lukas", "Sofia", "Daniel", "Chen", "Fatima",
         "Olu", "Hannah", "Mateo", "Yuki", "Noah", "Ines", "Ravi", "Grace", "Karim", "Elena"]
LAST = ["Alvarez", "Chen", "Raman", "Becker", "Okafor", "Novak", "Rossi", "Kim", "Nakamura",
        "Haddad", "Adeyemi", "Schmidt", "Garcia", "Tanaka", "Larsen", "Moreau", "Singh", "Walsh"]
COMPANIES = ["Northwind", "Contoso", "Fabrikam", "Tailspin", "Wingtip", "Litware", "Proseware",
             "Adatum", "Fourth Coffee", "Woodgrove", "Lamna", "Relecloud"]
SERVICES = ["billing-api", "checkout", "search-indexer", "notifications", "auth-gateway",
            "report-worker", "media-resizer", "ledger", "inventory-sync", "webhooks"]


def rand(chars, n):
    return "".join(RNG.choice(chars) for _ in range(n))


def person():
    return f"{RNG.choice(FIRST)} {RNG.choice(LAST)}"


def email_of(name, domain="example.com"):
    return name.lower().replace(" ", ".") + "@" + domain


def uid():
    return str(uuid.UUID(int=RNG.getrandbits(128), version=4))


def sha256_hex():
    return hashlib.sha256(str(RNG.random()).encode()).hexdigest()


def sha1_hex():
    return hashlib.sha1(str(RNG.random()).encode()).hexdigest()


def b64_bytes(n, urlsafe=False, pad=True):
    raw = bytes(RNG.getrandbits(8) for _ in range(n))
    text = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(raw).decode()
    return text if pad else text.rstrip("=")


def b64_of(text):
    return base64.b64encode(text.encode()).decode()


def date():
    return f"2026-{RNG.randint(1, 12):02d}-{RNG.randint(1, 28):02d}"


def timestamp():
    return f"{date()}T{RNG.randint(0, 23):02d}:{RNG.randint(0, 59):02d}:{RNG.randint(0, 59):02d}Z"


def text_result(text):
    return {"content": [{"type": "text", "text": text}], "isError": False}


def json_result(value, summary=None):
    """A result as modern MCP servers answer: a short text block and structuredContent."""
    text = summary if summary is not None else json.dumps(value, indent=2, ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "structuredContent": value,
            "isError": False}


def error_result(text):
    return {"content": [{"type": "text", "text": text}], "isError": True}


def held_out(category, families):
    """The families of `category` kept out of tuning: every third one by name, and at least
    one when the category has two or more. Fixed, so a family never changes sides."""
    names = sorted(families)
    chosen = {name for i, name in enumerate(names) if i % 3 == 2}
    if not chosen and len(names) >= 2:
        chosen = {names[-1]}
    return chosen


class Corpus:
    def __init__(self):
        self.cases = []

    def add_class(self, klass, categories):
        """`categories`: {category: {family: (label, make, count)}}; `make()` returns the
        case's payload fields (a dict)."""
        for category, families in categories.items():
            # Attack and benign families are held out apart, so both sides of every
            # category are measured on text nobody tuned on.
            heldout = set()
            for label in ("attack", "benign"):
                heldout |= held_out(category, [f for f, v in families.items() if v[0] == label])
            for family, (label, make, count) in families.items():
                for n in range(count):
                    payload = make()
                    case = {
                        "id": f"{klass}/{category}/{family}/{n:03d}",
                        "class": klass,
                        "category": category,
                        "family": family,
                        "label": label,
                        "split": "heldout" if family in heldout else "tune",
                    }
                    case.update(payload)
                    self.cases.append(case)

    def write(self, path):
        with open(path, "w", encoding="utf-8") as out:
            for case in self.cases:
                out.write(json.dumps(case, ensure_ascii=False, sort_keys=True) + "\n")
