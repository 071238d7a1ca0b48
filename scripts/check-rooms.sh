#!/bin/sh
# check-rooms.sh — the house rule of ../shared/docs/DESIGN.md, checked: a room under src/ includes
# only itself and rooms below it in ROOMS (data flows down the list at run time), so no two rooms
# include each other. Run by ctest (test "rooms"); prints every offending #include and fails.
# A new room must be added to ROOMS in its place, or this check fails naming it.
ROOMS="server eval bench train corpus gen chat grammar kv model convert tokenizer sample kernels quant gguf util"
cd "$(dirname "$0")/../src" || exit 2
rank() { i=0; for r in $ROOMS; do [ "$r" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done; echo -1; }
bad=0
for dir in */; do
    room=${dir%/}
    me=$(rank "$room")
    if [ "$me" -lt 0 ]; then echo "src/$room: room not in the house order (scripts/check-rooms.sh ROOMS)"; bad=1; continue; fi
    for f in "$room"/*.c "$room"/*.h; do
        [ -e "$f" ] || continue
        for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_0-9]*\)\/.*".*/\1/p' "$f" | sort -u); do
            them=$(rank "$inc")
            if [ "$them" -lt 0 ]; then echo "src/$f includes \"$inc/...\": not a room"; bad=1
            elif [ "$them" -lt "$me" ]; then echo "src/$f includes \"$inc/...\": room $inc is above $room"; bad=1; fi
        done
    done
done
[ $bad -eq 0 ] && echo "rooms: every include points down the house order"
exit $bad
