#!/usr/bin/env python3
"""Judge `govulncheck -format json` output read on stdin.

    govulncheck -db file://$PWD/.bin/vulndb -format json ./... | python3 infra/scripts/vulncheck.py

govulncheck's own exit status fails on any called vulnerability, including
one in the standard library. The standard library comes with the machine's
Go toolchain, which this project does not pin, so such a finding is printed
as a warning naming the Go version that fixes it; a called vulnerability
in a required module (which `go get` can fix) fails with status 1.
Vulnerabilities in code the product imports but never calls are counted
only.
"""

import json
import sys


def messages(text):
    """Yields the JSON objects of govulncheck's stream (not one array)."""
    dec = json.JSONDecoder()
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return
        obj, i = dec.raw_decode(text, i)
        yield obj


def main() -> int:
    called = {}  # (module, osv id) -> fixed version
    imported = set()
    for msg in messages(sys.stdin.read()):
        f = msg.get("finding")
        if not f or not f.get("trace"):
            continue
        top = f["trace"][0]
        key = (top.get("module", "?"), f["osv"])
        if top.get("function"):
            called[key] = f.get("fixed_version") or "no fix yet"
        elif top.get("package"):
            imported.add(key)
    failed = False
    for (module, osv), fixed in sorted(called.items()):
        if module == "stdlib":
            print(f"vulncheck: warning: {osv} in the standard library, fixed in Go {fixed.lstrip('v')}: "
                  "needs a newer Go toolchain than this machine's")
        else:
            print(f"vulncheck: {osv} in {module}, called by the product; fixed in {fixed}")
            failed = True
    others = imported - called.keys()
    print(f"vulncheck: {len(called)} called ({sum(m == 'stdlib' for m, _ in called)} in the standard library), "
          f"{len(others)} more in imported packages but not called")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
