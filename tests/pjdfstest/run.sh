#!/usr/bin/env bash
# Usage: run.sh DIR [TIER...]
#   Runs the pjdfstest tests selected in pjdfstest.toml ([selection]) inside
#   DIR (pjdfstest creates DIR/.tmpXXXXXX/.tmpYYYYYY/... and removes it after).
#   Tiers: core timestamps modes kernel (default: all four).
#   Prints pjdfstest's output, one "FAILED-TEST <name>" line per failure, and
#   last a line: PASSED <n> FAILED <m> SKIPPED <k>
#   Exits 0 whatever the test results; non-zero only on a usage/setup error.
# Environment: CFG (config path), PJDFSTEST (binary), PJD_TIMEOUT (seconds for
#   the whole run, default 600; a hung run counts its unfinished tests as failed).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CFG=${CFG:-$here/pjdfstest.toml}
PJDFSTEST=${PJDFSTEST:-pjdfstest}
PJD_TIMEOUT=${PJD_TIMEOUT:-600}

if [ $# -lt 1 ] || [ ! -d "$1" ]; then
    echo "usage: $0 DIR [core|timestamps|modes|kernel]..." >&2
    exit 2
fi
dir=$1
shift
tiers=("$@")
[ ${#tiers[@]} -eq 0 ] && tiers=(core timestamps modes kernel)

if ! command -v "$PJDFSTEST" >/dev/null 2>&1; then
    echo "run.sh: $PJDFSTEST not found (cargo install pjdfstest --version 0.2.2 --locked)" >&2
    exit 2
fi

# Names of the selected tests: quoted strings in the arrays of [selection]
# whose key is one of the requested tiers.
mapfile -t names < <(awk -v want=" ${tiers[*]} " '
    { l = $0; sub(/#.*/, "", l) }               # test names never contain "#"
    !inarr && l ~ /^[[:space:]]*\[[^]]*\][[:space:]]*$/ {
        sec = l; gsub(/[][[:space:]]/, "", sec); next
    }
    sec != "selection" { next }
    !inarr && l ~ /^[[:space:]]*[A-Za-z0-9_-]+[[:space:]]*=[[:space:]]*\[/ {
        key = l; sub(/^[[:space:]]*/, "", key); sub(/[[:space:]]*=.*/, "", key)
        take = index(want, " " key " ") > 0; inarr = 1
        sub(/^[^[]*\[/, "", l)
    }
    inarr {
        rest = l
        while (match(rest, /"[^"]+"/)) {
            if (take) print substr(rest, RSTART + 1, RLENGTH - 2)
            rest = substr(rest, RSTART + RLENGTH)
        }
        if (rest ~ /\]/) inarr = 0
    }
' "$CFG")

for t in "${tiers[@]}"; do
    case $t in core|timestamps|modes|kernel) ;; *) echo "run.sh: unknown tier $t" >&2; exit 2 ;; esac
done
if [ ${#names[@]} -eq 0 ]; then
    echo "run.sh: no tests selected from $CFG (tiers: ${tiers[*]})" >&2
    exit 2
fi

args=()
for n in "${names[@]}"; do args+=("pjdfstest::tests::$n"); done

out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "run.sh: ${#names[@]} tests (tiers: ${tiers[*]}) in $dir" >&2
# NO_COLOR: no ANSI colours; the parser strips them anyway.
NO_COLOR=1 timeout --kill-after=10 "$PJD_TIMEOUT" \
    "$PJDFSTEST" -c "$CFG" -p "$dir" -e "${args[@]}" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 124 ] && echo "run.sh: pjdfstest timed out after ${PJD_TIMEOUT}s" >&2

# Count per-test result lines: "<name>  ok|FAILED|skipped|failed as expected|
# PASSED UNEXPECTEDLY". A test that never reported (pjdfstest crashed or timed
# out) counts as failed, as do expected failures and unexpected passes.
sed 's/\x1b\[[0-9;]*m//g' "$out" | awk -v sel="$(printf '%s\n' "${names[@]}")" '
    BEGIN { n = split(sel, a, "\n"); for (i = 1; i <= n; i++) if (a[i] != "") want[a[i]] = 1 }
    /^[^[:space:]]/ && ($1 in want) && !($1 in seen) {
        r = $0; sub(/^[^[:space:]]+[[:space:]]+/, "", r); sub(/[[:space:]]+$/, "", r)
        if (r == "ok") { seen[$1] = "pass" }
        else if (r == "skipped") { seen[$1] = "skip" }
        else if (r == "FAILED" || r == "failed as expected" || r == "PASSED UNEXPECTEDLY") { seen[$1] = "fail" }
    }
    END {
        p = f = s = 0
        for (i = 1; i <= n; i++) {               # in selection order
            t = a[i]
            if (t == "" || done[t]++) continue
            if (seen[t] == "pass") p++
            else if (seen[t] == "skip") s++
            else { f++; print "FAILED-TEST " t (t in seen ? "" : " (no result)") }
        }
        printf "PASSED %d FAILED %d SKIPPED %d\n", p, f, s
    }
'
exit 0
