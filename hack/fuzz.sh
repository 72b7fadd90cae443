#!/usr/bin/env bash
# Runs every fuzz target in the module (each `func FuzzXxx` in a *_test.go file) for FUZZTIME
# (default 10s) each, one after the other (go test -fuzz takes one target and one package at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
GO=${GO:-go}
failed=0
while IFS=: read -r file name; do
	pkg="./$(dirname "$file")"
	echo "== $pkg $name ($FUZZTIME)"
	if ! $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"; then
		failed=$((failed + 1))
	fi
done < <(grep -rHo --include='*_test.go' --exclude-dir=_output --exclude-dir=bin '^func Fuzz[A-Za-z0-9_]*' . |
	sed -e 's|^\./||' -e 's|:func |:|' | sort)
if [ "$failed" -gt 0 ]; then
	echo "$failed fuzz target(s) failed"
	exit 1
fi
