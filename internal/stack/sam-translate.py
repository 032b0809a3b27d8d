#!/usr/bin/env python3
"""Turn a SAM template into plain CloudFormation with the SAM translator.

    .venv/bin/python internal/stack/sam-translate.py template.yaml
    .venv/bin/python internal/stack/sam-translate.py - < template.yaml

internal/stack runs it (with the .venv's Python, where `make tools` installs
the SAM CLI and its translator, samtranslator) and reads what it prints,
one JSON object:

    {"template": {...}, "resourceOrder": [...], "parameterOrder": [...]}

"template" is the translated template: YAML short tags (!Ref, !Sub, ...)
in their long form, Globals merged into each function, every
AWS::Serverless::* resource expanded into the AWS::* resources CloudFormation
would create (AWS::Lambda::Function, its role, an AWS::Lambda::EventSourceMapping
per SQS event, an AWS::Events::Rule per Schedule event, the API Gateway
resources, ...). The orders are the template file's (the translator writes
resources in an order of its own, and JSON objects keep none), with the
resources the translator added after them, sorted.

What the translator leaves to CloudFormation stays as it is, and
internal/stack evaluates it for each deployment: intrinsic functions and
conditions (the translator substitutes parameter values only into a few
SAM properties: none that internal/stack reads, so one translation serves every
deployment's parameters) and the AWS::LanguageExtensions transform, which
CloudFormation runs before SAM's and the translator does not implement: in
template.yaml it only lets the table's DeletionPolicy be an Fn::If, which
stays in the output and means nothing locally.

A template without SAM's transform is printed as parsed. Errors go to
stderr with exit status 1.
"""

import json
import logging
import os
import sys

from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

SAM_TRANSFORM = "AWS::Serverless-2016-10-31"

# The translator reads the region from boto3's configuration to pick the
# partition of the ARNs it writes. internal/stack's pseudo parameters say
# us-east-1 whatever the developer's AWS settings, and so does this.
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ.pop("AWS_REGION", None)
# Nor does it need a profile: botocore refuses an empty AWS_PROFILE (a
# test's way of clearing it) with ProfileNotFound before translating.
for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
    os.environ.pop(name, None)
# The translator logs notes about its feature toggles; only errors matter.
logging.disable(logging.WARNING)


class NoManagedPolicies:
    """The translator asks for the ARNs of AWS managed policies only for
    Policies that name one; template.yaml's are all inline statements."""

    def load(self):
        return {}


def has_sam_transform(tpl) -> bool:
    t = tpl.get("Transform")
    return t == SAM_TRANSFORM or (isinstance(t, list) and SAM_TRANSFORM in t)


def in_order(source_keys, keys):
    """Orders keys as source_keys (the file's order), then the rest sorted:
    the translator writes its resources in no stable order."""
    known = [k for k in source_keys if k in keys]
    return known + sorted(k for k in keys if k not in set(known))


def translate(text: str) -> dict:
    tpl = yaml_parse(text)
    if not isinstance(tpl, dict):
        raise ValueError("template is not a mapping")
    source_resources = list((tpl.get("Resources") or {}).keys())
    source_parameters = list((tpl.get("Parameters") or {}).keys())
    if has_sam_transform(tpl):
        # The translator wants the S3 location `sam package` would write
        # in place of a local CodeUri (as `sam validate` does).
        for rid, res in (tpl.get("Resources") or {}).items():
            props = res.get("Properties") if isinstance(res, dict) else None
            if res.get("Type") == "AWS::Serverless::Function" and isinstance(props, dict):
                if isinstance(props.get("CodeUri", "."), str) and not str(props.get("CodeUri", ".")).startswith("s3://"):
                    props["CodeUri"] = f"s3://local/{rid}"
        tpl = transform(tpl, {}, NoManagedPolicies())
    return {
        "template": tpl,
        "resourceOrder": in_order(source_resources, list((tpl.get("Resources") or {}).keys())),
        "parameterOrder": in_order(source_parameters, list((tpl.get("Parameters") or {}).keys())),
    }


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    text = sys.stdin.read() if sys.argv[1] == "-" else open(sys.argv[1], encoding="utf-8").read()
    try:
        out = translate(text)
    except InvalidDocumentException as e:
        print("; ".join(str(c) for c in e.causes), file=sys.stderr)
        return 1
    except Exception as e:  # YAML errors, a template that is not a mapping
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
