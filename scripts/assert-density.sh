#!/bin/sh
# assert-density.sh — runtime assertions per 1,000 lines in each room of src/ (docs/assertions.md).
#
# Counts the uses of TERN_ASSERT, TERN_ASSERT_SLOW, TERN_ALWAYS, TERN_NEVER (src/util/check.h)
# and the room's own wrappers of them (PC_CHECK) in each room's .c and .h files, over all their
# lines; static assertions are not counted (they check layouts, not run-time state), nor
# check.h's own definitions.
#
#   sh scripts/assert-density.sh                 print the table
#   sh scripts/assert-density.sh --ref main      ... with the counts at git ref `main` beside
#   sh scripts/assert-density.sh --min 10 R...   also fail (exit 1) if one of the rooms R is
#                                                below 10 per 1,000 lines (ctest assert_density)
set -eu
cd "$(dirname "$0")/.."
ref=""
min=""
while [ $# -gt 0 ]; do
    case "$1" in
    --ref) ref="$2"; shift 2 ;;
    --min) min="$2"; shift 2; break ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "assert-density.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
checked_rooms="$*"
if [ -n "$min" ] && [ -z "$checked_rooms" ]; then
    echo "assert-density.sh: --min needs the rooms to check" >&2
    exit 2
fi

PATTERN='TERN_ASSERT(_SLOW)?\(|TERN_ALWAYS\(|TERN_NEVER\(|PC_CHECK\('

# lines and assertions of the files given on stdin (one path a line), read by `cat_cmd path`
count() {
    awk -v pat="$PATTERN" '
        FNR == 1 { skip = (FILENAME ~ /util\/check\.h$/) }
        { lines++ }
        !skip && !/^#[ \t]*define/ { s = $0; while (match(s, pat)) { n++; s = substr(s, RSTART + RLENGTH) } }
        END { printf "%d %d\n", lines, n }' "$@"
}

count_ref() { # room at git ref: lines and assertions
    tmp=$(mktemp -d)
    git archive "$ref" "src/$1" 2>/dev/null | tar -x -C "$tmp" 2>/dev/null || true
    if [ -d "$tmp/src/$1" ]; then
        set -- $(find "$tmp/src/$1" -maxdepth 1 \( -name '*.c' -o -name '*.h' \) | sort)
        [ $# -gt 0 ] && count "$@" || echo "0 0"
    else
        echo "0 0"
    fi
    rm -rf "$tmp"
}

density() { awk -v a="$1" -v l="$2" 'BEGIN { if (l > 0) printf "%.1f", 1000 * a / l; else printf "-" }'; }

if [ -n "$ref" ]; then
    printf '%-10s %7s %7s %7s   %7s %7s %7s\n' room lines asserts per1k "lines@" "asserts@" "per1k@"
else
    printf '%-10s %7s %7s %7s\n' room lines asserts per1k
fi
fail=0
tl=0; ta=0; rl=0; ra=0
for dir in src/*/; do
    room=$(basename "$dir")
    set -- $(find "$dir" -maxdepth 1 \( -name '*.c' -o -name '*.h' \) | sort)
    [ $# -gt 0 ] || continue
    set -- $(count "$@")
    lines=$1; n=$2
    tl=$((tl + lines)); ta=$((ta + n))
    d=$(density "$n" "$lines")
    if [ -n "$ref" ]; then
        set -- $(count_ref "$room")
        rl=$((rl + $1)); ra=$((ra + $2))
        printf '%-10s %7d %7d %7s   %7d %7d %7s\n' "$room" "$lines" "$n" "$d" "$1" "$2" "$(density "$2" "$1")"
    else
        printf '%-10s %7d %7d %7s\n' "$room" "$lines" "$n" "$d"
    fi
    for r in $checked_rooms; do
        if [ "$r" = "$room" ] && awk -v a="$n" -v l="$lines" -v m="$min" 'BEGIN { exit !(1000 * a < m * l) }'; then
            echo "assert-density.sh: src/$room has $d assertions per 1,000 lines, below $min" >&2
            fail=1
        fi
    done
done
if [ -n "$ref" ]; then
    printf '%-10s %7d %7d %7s   %7d %7d %7s\n' total "$tl" "$ta" "$(density "$ta" "$tl")" "$rl" "$ra" "$(density "$ra" "$rl")"
else
    printf '%-10s %7d %7d %7s\n' total "$tl" "$ta" "$(density "$ta" "$tl")"
fi
for r in $checked_rooms; do
    [ -d "src/$r" ] || { echo "assert-density.sh: no room src/$r" >&2; fail=1; }
done
exit $fail
