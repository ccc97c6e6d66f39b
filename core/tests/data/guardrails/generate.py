#!/usr/bin/env python3
"""Writes corpus.jsonl, the guardrail evaluation corpus (see README.md). Deterministic:
run `python3 generate.py` in this folder and the file comes out byte for byte the same."""
import collections
import os

import gen_arguments
import gen_definitions
import gen_injection
import gen_secrets
from gen_common import Corpus

corpus = Corpus()
corpus.add_class("secrets", gen_secrets.CATEGORIES)
corpus.add_class("injection", gen_injection.CATEGORIES)
corpus.add_class("arguments", gen_arguments.CATEGORIES)
corpus.add_class("definitions", gen_definitions.CATEGORIES)
corpus.write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus.jsonl"))

counts = collections.Counter((c["class"], c["label"], c["split"]) for c in corpus.cases)
for key in sorted(counts):
    print(*key, counts[key])
benign = sum(1 for c in corpus.cases if c["label"] == "benign")
print(f"total {len(corpus.cases)}, benign {benign} ({100 * benign / len(corpus.cases):.1f}%)")
