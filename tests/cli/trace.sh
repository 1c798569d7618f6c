#!/bin/sh
# colibri trace on colibri-tiny: a row per MoE layer (overlap, reuse-distance
# shares summing to about 100%, recall), a row per budget, Belady's optimum
# never below the demand policies' hit rate nor above their reads, the
# hot-set table's half-the-slots column equal to ours+pf (the store's rule), and bad
# arguments refused by name.
set -eu
t=${TMPDIR:-/tmp}/trace.$$; trap 'rm -f "$t" "$t.err"' EXIT
sed -n 1,80p /usr/share/common-licenses/GPL-3 > "$t.txt" 2>/dev/null || printf 'It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife. %.0s' 1 2 3 4 5 6 7 8 > "$t.txt"
"$COLIBRI" trace -f "$t.txt" -n 300 -t 1 --budgets 4,20,40 > "$t" 2>"$t.err"
rm -f "$t.txt"
grep -q '^Routing of 300 tokens (forwarded one at a time), 5 MoE layers x 16 experts, top-2\.$' "$t"
[ "$(grep -Ec '^\| [1-5] \| [0-9.]+% \| ' "$t")" -eq 5 ]
awk -F'|' '/^\| [1-5] \| / { split($4, a, "/"); s = 0; for (i in a) { sub(/%/, "", a[i]); s += a[i] }
    if (s < 96 || s > 104) { print "reuse shares sum to " s; exit 1 } }' "$t"
[ "$(grep -Ec '^\| (4|20|40) \([0-9]+%\) \|' "$t")" -eq 3 ]
awk -F'|' '/^\| [0-9]+ \([0-9]+%\) \|/ {
    for (i = 3; i <= 7; i++) { v = $i; sub(/^ */, "", v); split(v, p, "[%( )]+"); hit[i] = p[1]; rd[i] = p[2] }
    for (i = 3; i <= 6; i++) if (i != 5 && (hit[5] + 0 < hit[i] + 0 || rd[5] + 0 > rd[i] + 0)) {
        print "Belady below column " i ": " $0; exit 1 } }' "$t"
# the hot-set table: a row per budget; its 1/2 column is the store's rule, so it is ours+pf above
[ "$(grep -Ec '^\| (4|20|40) slots \| [0-9.]+% ' "$t")" -eq 3 ]
awk -F'|' '/^\| [0-9]+ \([0-9]+%\) \|/ { pf[$2 + 0] = $7 }
    /^\| [0-9]+ slots \| [0-9.]+% / { n++; if ($6 != pf[$2 + 0]) { print "hot set 1/2:" $6 "against ours+pf:" pf[$2 + 0]; exit 1 } }
    END { if (n != 3) { print n " hot-set rows"; exit 1 } }' "$t"
if "$COLIBRI" trace -p "too short" -n 2 >/dev/null 2>"$t.err"; then echo "trace.sh: -n 2 accepted"; exit 1; fi
if "$COLIBRI" trace -p "x y z w v u" --budgets 1 >/dev/null 2>"$t.err"; then echo "trace.sh: budget 1 accepted"; exit 1; fi
