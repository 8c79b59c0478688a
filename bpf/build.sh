#!/usr/bin/env bash
# Regenerates bpf/src/smcrun.bpf.o from bpf/src/smcrun.bpf.c (the object is committed so that
# building smcrun needs only the Rust toolchain; .ci/run rebuilds it and checks it is the same).
#
#   bash bpf/build.sh           rebuild the object in place
#   bash bpf/build.sh --check   rebuild into a temporary file and fail unless it equals the
#                               committed object byte for byte
#
# Needs clang (Debian: apt-get install clang). The build is reproducible: no header is included,
# the source is named relative to its folder and the DWARF compilation directory is "." so no
# path of this machine ends up in the object, and the clang version is recorded (CLANG below):
# another clang may emit other (equally valid) bytes, so --check refuses to compare with one.
set -euo pipefail
readonly CLANG_WANT="Debian clang version 14.0.6"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/src"
cc=${CLANG:-clang}
command -v "$cc" >/dev/null || { echo "bpf/build.sh: $cc not found (apt-get install clang)" >&2; exit 2; }
have=$("$cc" --version | head -n1)
if [ "$have" != "$CLANG_WANT" ]; then
    echo "bpf/build.sh: $cc is \"$have\"; the committed object was built with \"$CLANG_WANT\"" >&2
    [ "${1:-}" = --check ] && exit 2
    echo "bpf/build.sh: building anyway; update CLANG_WANT in bpf/build.sh if you commit the result" >&2
fi
build() { # build OUT
    "$cc" -target bpf -O2 -g -Wall -Werror -fdebug-compilation-dir=. -c smcrun.bpf.c -o "$1"
}
if [ "${1:-}" = --check ]; then
    tmp=$(mktemp)
    trap 'rm -f "$tmp"' EXIT
    build "$tmp"
    if cmp -s "$tmp" smcrun.bpf.o; then
        echo "bpf/build.sh: bpf/src/smcrun.bpf.o matches bpf/src/smcrun.bpf.c"
    else
        echo "bpf/build.sh: bpf/src/smcrun.bpf.o is NOT what bpf/src/smcrun.bpf.c compiles to: run bash bpf/build.sh and commit the object" >&2
        exit 1
    fi
else
    build smcrun.bpf.o
    echo "bpf/build.sh: wrote bpf/src/smcrun.bpf.o ($(stat -c %s smcrun.bpf.o) bytes)"
fi
