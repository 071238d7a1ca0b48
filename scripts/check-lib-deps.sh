#!/bin/sh
# check-lib-deps.sh — libtern, the runtime, stays free of HTTP, YAML and curl (../shared/docs/
# DESIGN.md): an embedder links a model runner, nothing else. Checked three ways on a build:
#   1. symbols: libtern.a neither defines nor needs any curl_*, MHD_* (libmicrohttpd) or yaml_*
#      symbol (nm);
#   2. the link line CMake wrote for tern_embed (tests/embed/tern_embed.c, a program linking
#      libtern alone) names none of those libraries;
#   3. the tern_embed binary has no DT_NEEDED entry for them (readelf -d).
# The same probes run on what must have them (libtern_server.a needs MHD_*, libtern_bench.a curl_*
# and yaml_*, the tern binary all three libraries), so a probe that finds nothing can not pass
# by accident.
#
#   sh scripts/check-lib-deps.sh BUILD_DIR          # ctest "lib_deps"
set -eu
b=${1:?usage: check-lib-deps.sh BUILD_DIR}
bad=0
fail() { echo "FAIL: $*"; bad=1; }
ok() { echo "ok:   $*"; }
FORBIDDEN='curl_|MHD_|yaml_'
# nm lines of an archive that name a symbol of a forbidden library, defined or undefined
syms() { nm "$1" 2>/dev/null | grep -E " [A-Za-z] ($2)" | sort -u || true; }

for f in "$b/libtern.a" "$b/libtern_server.a" "$b/libtern_bench.a" "$b/bin/tern_embed" "$b/bin/tern"; do
    [ -e "$f" ] || { echo "check-lib-deps.sh: $f not built (build all targets first)" >&2; exit 2; }
done

found=$(syms "$b/libtern.a" "$FORBIDDEN")
if [ -n "$found" ]; then fail "libtern.a names HTTP/YAML/curl symbols:"; echo "$found" | head -20
else ok "libtern.a: no curl_*, MHD_*, yaml_* symbol"; fi
[ -n "$(syms "$b/libtern_server.a" 'MHD_')" ] && ok "libtern_server.a needs MHD_* (the probe sees symbols)" \
    || fail "libtern_server.a shows no MHD_* symbol: the symbol probe is broken"
[ -n "$(syms "$b/libtern_bench.a" 'curl_')" ] && [ -n "$(syms "$b/libtern_bench.a" 'yaml_')" ] \
    && ok "libtern_bench.a needs curl_* and yaml_*" || fail "libtern_bench.a shows no curl_* or yaml_* symbol"

link="$b/CMakeFiles/tern_embed.dir/link.txt"
if [ ! -f "$link" ]; then fail "no link line at $link"
elif grep -Eq 'curl|microhttpd|yaml' "$link"; then fail "tern_embed's link line names curl, libmicrohttpd or libyaml:"; cat "$link"
else ok "tern_embed's link line: $(grep -Eo '[^ ]*lib(tern|cjson|utf8proc|nettle)[^ ]*' "$link" | sed 's|.*/||' | sort -u | tr '\n' ' ')"; fi

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
n=$(needed "$b/bin/tern_embed")
if echo "$n" | grep -Eq 'curl|microhttpd|yaml'; then fail "tern_embed needs: $(echo $n)"
else ok "tern_embed needs only: $(echo $n)"; fi
nt=$(needed "$b/bin/tern")
if echo "$nt" | grep -q microhttpd && echo "$nt" | grep -q curl && echo "$nt" | grep -q yaml; then
    ok "tern (the CLI) needs libmicrohttpd, libcurl and libyaml (the DT_NEEDED probe sees them)"
else fail "the tern binary's DT_NEEDED lacks libmicrohttpd, libcurl or libyaml: the probe is broken ($(echo $nt))"; fi
exit $bad
