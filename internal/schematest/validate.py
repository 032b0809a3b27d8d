"""Validate JSON lines on stdin against a JSON Schema (Draft 2020-12).

Prints a JSON array with one list of error messages per line (empty when
the line is valid). Formats (date-time) are checked.
"""
import json
import sys

import jsonschema

schema = json.load(open(sys.argv[1], encoding="utf-8"))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(
    schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
verdicts = []
for line in sys.stdin:
    if not line.strip():
        continue
    instance = json.loads(line)
    verdicts.append(sorted(
        "%s: %s" % ("/".join(str(p) for p in e.absolute_path), e.message)
        for e in validator.iter_errors(instance)))
json.dump(verdicts, sys.stdout)
