#!/bin/sh
# count-api.sh — the public functions each header of include/ declares, counted by the compiler
# (gcc -aux-info lists every function declaration of a translation unit with the file it comes
# from; the header is compiled alone, in C11). Prints "header functions" per header and the total.
#
#   sh scripts/count-api.sh                       # the table
#   sh scripts/count-api.sh --max tern.h=185 ...  # and fail when a header declares more than that
#
# The limit keeps tern.h readable in one sitting (../shared/docs/DESIGN.md): a function added past
# it means moving something to the header of the library it belongs to, or raising the limit on
# purpose. Run by ctest (test "api_size").
set -eu
cd "$(dirname "$0")/../include"
CC=${CC:-gcc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
limits=""
while [ $# -gt 0 ]; do
    case $1 in
        --max) limits="$limits $2"; shift 2 ;;
        *) echo "count-api.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
total=0
bad=0
for h in *.h; do
    printf '#include "%s"\n' "$h" > "$tmp/one.c"
    if ! "$CC" -std=c11 -I. -fsyntax-only -aux-info "$tmp/aux.txt" "$tmp/one.c" 2>"$tmp/err"; then
        echo "count-api.sh: $h does not compile alone:" >&2; cat "$tmp/err" >&2; exit 1
    fi
    # one line per declaration: "/* <path>/<h>:LINE:NC */ extern ..." (NF: an inline definition)
    n=$(grep -c "/$h:[0-9]*:N[CF] \*/" "$tmp/aux.txt" || true)
    printf '%-16s %4d\n' "$h" "$n"
    total=$((total + n))
    for l in $limits; do
        if [ "${l%%=*}" = "$h" ] && [ "$n" -gt "${l#*=}" ]; then
            echo "count-api.sh: $h declares $n functions, more than its limit ${l#*=}" >&2; bad=1
        fi
    done
done
printf '%-16s %4d\n' total "$total"
exit $bad
