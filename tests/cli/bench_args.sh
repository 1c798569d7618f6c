#!/bin/sh
# The benchmark programs (bench/*.c, built by make test) print their usage for
# --help and exit 0, and refuse a bad argument with exit 2 and a message naming
# it, before any benchmark work starts.
set -u
B=${BUILD:-build}/bench
fail=0
expect_fail() {  # expect_fail NAME SUBSTRING PROGRAM ARGS...: exit 2, SUBSTRING in stderr
    name=$1; want=$2; shift 2
    err=$("$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -ne 2 ]; then echo "FAIL $name: exit $rc ($err)"; fail=1; return; fi
    case "$err" in *"$want"*) echo "ok   $name: $err" ;; *) echo "FAIL $name: '$err' lacks '$want'"; fail=1 ;; esac
}
for p in matvec attn restore; do
    out=$("$B/$p" --help 2>&1); rc=$?
    case "$out" in "usage: $p "*) [ $rc -eq 0 ] && echo "ok   $p --help" || { echo "FAIL $p --help: exit $rc"; fail=1; } ;;
                   *) echo "FAIL $p --help: $out"; fail=1 ;; esac
    expect_fail "$p unknown" "'--bogus'" "$B/$p" --bogus
done
expect_fail "matvec mib" "'x'" "$B/matvec" x
expect_fail "matvec mib 0" "--mib" "$B/matvec" --mib 0
expect_fail "matvec two sizes" "'7'" "$B/matvec" 5 7
expect_fail "attn ctx" "'x' in '1024,x'" "$B/attn" --ctx 1024,x
expect_fail "attn heads" "--heads" "$B/attn" --heads 0
expect_fail "attn min-time" "--min-time" "$B/attn" --min-time soon
expect_fail "attn threads" "'--threads' needs a value" "$B/attn" --threads
expect_fail "restore reps" "--reps" "$B/restore" --reps 0
expect_fail "restore n" "'' in '5,'" "$B/restore" --n 5,
expect_fail "restore threads" "--threads" "$B/restore" --threads two
exit $fail
