#!/usr/bin/env python3
"""Build multi-step requests from a split's queries, to measure search_tools on
requests that ask for several things (see the README's "Ranking quality").

    scripts/compose-queries.py OUTDIR QUERIES.jsonl [QUERIES2.jsonl] [--per-half N] [--seed S]
    scripts/compose-queries.py OUTDIR QUERIES.jsonl --subset NAME

Each request joins two or three queries (one in three has three) with a
connective such as ", then " or ". After that, " and lists each query's
relevant tools as one step of "relevant_groups" (eval reports GroupRecall@5
and @10). With QUERIES2, every request has a query of each file (ask it of the
two catalogs merged). Queries whose relevant tools overlap are not joined.
The requests are halved as scripts/split-queries.py halves queries: a request
goes to OUTDIR/steps-a.jsonl when all its queries are in half a, to
steps-b.jsonl when all are in half b (others are not made), so a setting
chosen on half a can be scored on half b. The seed fixes the output.

--subset NAME keeps, instead, the queries whose "subset" is NAME (MetaTool's
"multi": questions that need two tools), each relevant tool a step, halved the
same way.
"""
import argparse
import hashlib
import json
import os
import random
import sys

CONNECTIVES = ["{a}, then {b}", "{a} and {b}", "{a}. After that, {b}", "First {a}; then {b}", "{a}, and also {b}"]


def half(text):
    return "a" if int(hashlib.sha256(text.strip().encode("utf-8")).hexdigest(), 16) % 2 == 0 else "b"


def load(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                q = json.loads(line)
                q["query"], q["relevant"]
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"{path}:{n}: not a query line: {e}")
            out.append(q)
    return out


def clause(text, first):
    text = text.strip().strip('"').rstrip(".?! ")
    if not first and text[:1].isupper() and not text[1:2].isupper():
        text = text[0].lower() + text[1:]
    return text


def compose(picks, rng):
    form = rng.choice(CONNECTIVES)
    text = clause(picks[0]["query"], True)
    for q in picks[1:]:
        text = form.format(a=text, b=clause(q["query"], False))
    return {"query": text, "relevant": [r for q in picks for r in q["relevant"]],
            "relevant_groups": [list(q["relevant"]) for q in picks]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("queries", nargs="+", help="one or two queries files")
    ap.add_argument("--per-half", type=int, default=150, help="requests in each half (default 150)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--subset", help="keep the queries of this subset instead of composing")
    a = ap.parse_args()
    if len(a.queries) > 2:
        sys.exit("give one or two queries files")
    pools = [[q for q in load(p) if q["relevant"]] for p in a.queries]
    halves = {"a": [], "b": []}
    if a.subset:
        for q in pools[0]:
            if q.get("subset") == a.subset:
                halves[half(q["query"])].append({"query": q["query"], "relevant": q["relevant"],
                                                 "relevant_groups": [[r] for r in q["relevant"]]})
    else:
        single = [[q for q in pool if len(q["relevant"]) == 1 or q.get("subset") != "multi"] for pool in pools]
        rng = random.Random(a.seed)
        tries = 0
        while min(len(h) for h in halves.values()) < a.per_half:
            tries += 1
            if tries > 1000 * a.per_half:
                sys.exit("too few queries to compose from")
            k = rng.choice([2, 2, 3])
            if len(single) == 1:
                picks = rng.sample(single[0], k)
            else:
                picks = [rng.choice(single[0]), rng.choice(single[1])]
                if k == 3:
                    picks.append(rng.choice(rng.choice(single)))
                rng.shuffle(picks)
            ids = [r for q in picks for r in q["relevant"]]
            sides = {half(q["query"]) for q in picks}
            if len(set(ids)) != len(ids) or len(sides) != 1:
                continue
            h = sides.pop()
            if len(halves[h]) < a.per_half:
                halves[h].append(compose(picks, rng))
    os.makedirs(a.outdir, exist_ok=True)
    for name, qs in halves.items():
        path = os.path.join(a.outdir, f"steps-{name}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for q in qs:
                f.write(json.dumps(q) + "\n")
        print(f"{path}: {len(qs)} requests")


if __name__ == "__main__":
    main()
