#!/usr/bin/env bash
# check-commits.sh fails when a commit subject is over 72 characters or not
# of the form `area: what changed` (issue 36: the why and any figures belong
# in the body). Run by `make lint`.
#
# Only commits after the one that added this script are checked, so the
# history before the rule stands. That commit is found by asking git which
# commit added this file, not by a recorded hash, because a rebase or a
# merge rewrites hashes. Only its descendants count (--ancestry-path): a
# branch begun before the check and merged later keeps its subjects.
# Merge commits are skipped (git writes their subjects), and so are reverts
# git wrote ("Revert ...").
#
# Where history is missing the check narrows instead of failing:
# - not a git checkout, or no git: nothing to check;
# - this file not committed yet: nothing to check;
# - a shallow clone (CI's depth-1 checkout): its oldest commit has no
#   parent, so git reports it as adding every file, this one included; the
#   check then covers the commits after it, which all came after the real
#   adding commit too. At depth 1 that is none.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

max=72
# An area (a folder, a package or a few of them, comma-separated), a colon,
# a space, and what changed.
form='^[A-Za-z0-9][A-Za-z0-9_./+*, -]*: [^ ]'
self=infra/scripts/check-commits.sh

if ! command -v git >/dev/null 2>&1 || ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "check-commits: not a git checkout; nothing to check"
	exit 0
fi
base=$(git log --format=%H --diff-filter=A -1 -- "$self")
if [ -z "$base" ]; then
	echo "check-commits: $self is not committed yet; nothing to check"
	exit 0
fi

bad=0
while IFS= read -r line; do
	hash=${line%% *}
	subject=${line#* }
	case $subject in 'Revert "'*) continue ;; esac
	if [ "${#subject}" -gt "$max" ]; then
		echo "check-commits: ${hash:0:12} subject is ${#subject} characters (at most $max; put the rest in the body): $subject"
		bad=1
	elif ! [[ $subject =~ $form ]]; then
		echo "check-commits: ${hash:0:12} subject is not \`area: what changed\`: $subject"
		bad=1
	fi
done < <(git log --no-merges --ancestry-path --format='%H %s' "$base..HEAD")
exit $bad
