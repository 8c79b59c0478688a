#!/usr/bin/env bash
# Regenerates the BPF objects from their sources in bpf/src (the objects are committed so that
# building smcrun needs only the Rust toolchain; .ci/run rebuilds them and checks they are the same):
# smcrun.bpf.o (BPF mode's socket() hook) from smcrun.bpf.c, agent.bpf.o (`smcrun agent`'s
# kprobes on smc.ko) from agent.bpf.c, handshake.bpf.o (`smcrun handshake`'s smc_hs_ctrl programs)
# from handshake.bpf.c.
#
#   bash bpf/build.sh           rebuild the objects in place
#   bash bpf/build.sh --check   rebuild into temporary files and fail unless each equals its
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
readonly OBJECTS=(smcrun agent handshake)
build() { # build NAME OUT
    "$cc" -target bpf -O2 -g -Wall -Werror -fdebug-compilation-dir=. -c "$1.bpf.c" -o "$2"
}
if [ "${1:-}" = --check ]; then
    tmp=$(mktemp)
    trap 'rm -f "$tmp"' EXIT
    bad=0
    for o in "${OBJECTS[@]}"; do
        build "$o" "$tmp"
        if cmp -s "$tmp" "$o.bpf.o"; then
            echo "bpf/build.sh: bpf/src/$o.bpf.o matches bpf/src/$o.bpf.c"
        else
            echo "bpf/build.sh: bpf/src/$o.bpf.o is NOT what bpf/src/$o.bpf.c compiles to: run bash bpf/build.sh and commit the object" >&2
            bad=1
        fi
    done
    exit $bad
else
    for o in "${OBJECTS[@]}"; do
        build "$o" "$o.bpf.o"
        echo "bpf/build.sh: wrote bpf/src/$o.bpf.o ($(stat -c %s "$o.bpf.o") bytes)"
    done
fi
