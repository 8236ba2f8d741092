#!/usr/bin/env python3
"""Split a queries.jsonl file into two halves for learning from use.

    scripts/split-queries.py QUERIES.jsonl OUTDIR

writes OUTDIR/half-a.jsonl and OUTDIR/half-b.jsonl. A line goes to half a
when the SHA-256 of its query's key is even, to half b otherwise: the split
is random-like, fixed, and the same whatever the order of the file. The key
is the query's words joined by one space (spacing aside: Go's
strings.Fields, as eval's --learn-from check reads a query, search.QueryKey),
so two queries eval takes for one land in one half. Then learn from one half
and evaluate the other, both ways:

    toolgate eval --tools T.jsonl --queries OUTDIR/half-b.jsonl --learn-from OUTDIR/half-a.jsonl
    toolgate eval --tools T.jsonl --queries OUTDIR/half-a.jsonl --learn-from OUTDIR/half-b.jsonl
"""
import hashlib
import json
import os
import re
import sys

# Go's white space (unicode.IsSpace), which strings.Fields splits at.
# Python's str.split() splits at U+001C..U+001F too, which Go does not.
SPACE = re.compile("[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")


def query_key(query):
    """search.QueryKey: the query's words, joined by one space."""
    return " ".join(w for w in SPACE.split(query) if w)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip())
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    halves = {"a": [], "b": []}
    # utf-8-sig: a byte-order mark, which eval takes, is not part of the
    # first query (json.loads refused the line).
    with open(src, encoding="utf-8-sig") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                q = query_key(json.loads(line)["query"])
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"{src}:{n}: not a query line: {e}")
            h = int(hashlib.sha256(q.encode("utf-8")).hexdigest(), 16)
            halves["a" if h % 2 == 0 else "b"].append(line if line.endswith("\n") else line + "\n")
    for name, lines in halves.items():
        with open(os.path.join(out, f"half-{name}.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(lines)
        print(f"{os.path.join(out, f'half-{name}.jsonl')}: {len(lines)} queries")


if __name__ == "__main__":
    main()
