#!/usr/bin/env python3
"""Print the per-shard check schedules of template.yaml.

template.yaml is the committed, hand-readable source; this script only
writes its repetitive part (conditions, one EventBridge rule and one Lambda
permission per shard, the wake queue's concurrency per ShardCount) so that changing the shard limit stays a one-line
edit. It rewrites the lines between each "# BEGIN generated: <part>" and
"# END generated: <part>" marker pair of template.yaml:

    python3 infra/scripts/gen-schedules.py           # rewrite template.yaml
    python3 infra/scripts/gen-schedules.py --check   # exit 1 if it is stale

CloudFormation conditions cannot compare numbers, so "ShardCount > N" is
built as a chain: shard N runs when ShardCount is N+1, or when shard N+1
runs. Each link is one Fn::Or over two conditions, well under its limit of
ten, and the chain reads top to bottom.
"""

import pathlib
import re
import sys

MAX_SHARDS = 16
INDENT = "  "


def conditions() -> str:
    lines = []
    for n in range(MAX_SHARDS - 1, -1, -1):
        if n == MAX_SHARDS - 1:
            lines.append(f'{INDENT}Shard{n}Enabled: !Equals [!Ref ShardCount, "{n + 1}"]')
        else:
            lines.append(
                f"{INDENT}Shard{n}Enabled: !Or "
                f'[!Equals [!Ref ShardCount, "{n + 1}"], !Condition Shard{n + 1}Enabled]'
            )
    return "\n".join(lines)


def resources() -> str:
    out = []
    for n in range(MAX_SHARDS):
        out.append(
            f"""{INDENT}CheckShard{n}Schedule:
{INDENT}  Type: AWS::Events::Rule
{INDENT}  Condition: Shard{n}Enabled
{INDENT}  Properties:
{INDENT}    Description: !Sub "urldownloader ${{Stage}}: check hosts of shard {n}"
{INDENT}    ScheduleExpression: rate(1 minute)
{INDENT}    State: ENABLED
{INDENT}    Targets:
{INDENT}      - Id: check-shard-{n}
{INDENT}        Arn: !GetAtt CheckFunction.Arn
{INDENT}        Input: '{{"shard": {n}}}'
{INDENT}CheckShard{n}Permission:
{INDENT}  Type: AWS::Lambda::Permission
{INDENT}  Condition: Shard{n}Enabled
{INDENT}  Properties:
{INDENT}    Action: lambda:InvokeFunction
{INDENT}    FunctionName: !Ref CheckFunction
{INDENT}    Principal: events.amazonaws.com
{INDENT}    SourceArn: !GetAtt CheckShard{n}Schedule.Arn"""
        )
    return "\n".join(out)


def wake_concurrency() -> str:
    # One wake-up invocation per shard, and never below Lambda's least
    # MaximumConcurrency, 2.
    lines = []
    for count in range(1, MAX_SHARDS + 1):
        lines.append(f'{INDENT}{INDENT}"{count}": {{Max: {max(2, count)}}}')
    return "\n".join(lines)


PARTS = {
    "shard conditions": conditions,
    "shard schedules": resources,
    "wake concurrency": wake_concurrency,
}
TEMPLATE = pathlib.Path(__file__).resolve().parents[2] / "template.yaml"


def render(text: str) -> str:
    for part, gen in PARTS.items():
        pattern = re.compile(
            rf"(^[ \t]*# BEGIN generated: {part}\b[^\n]*\n)(.*?)(^[ \t]*# END generated: {part}\n)",
            re.S | re.M,
        )
        if not pattern.search(text):
            sys.exit(f"{TEMPLATE}: no '# BEGIN generated: {part}' ... '# END generated: {part}' block")
        text = pattern.sub(lambda m: m.group(1) + gen() + "\n" + m.group(3), text)
    return text


def main() -> None:
    args = sys.argv[1:]
    if args not in ([], ["--check"]):
        sys.exit("usage: gen-schedules.py [--check]")
    old = TEMPLATE.read_text()
    new = render(old)
    if args == ["--check"]:
        if new != old:
            sys.exit(f"{TEMPLATE} is stale: run python3 infra/scripts/gen-schedules.py")
        return
    if new != old:
        TEMPLATE.write_text(new)


if __name__ == "__main__":
    main()
