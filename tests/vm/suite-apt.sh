# tests/vm/suite-apt.sh: read a Debian suite that is not in the machine's apt sources, without touching
# them (sourced by tests/vm/run and tests/vm/kernel-build; bash).
#
#   suite_apt SUITE apt-get|apt-cache ARGS...   # apt with SUITE's own list file and state folder
#   suite_fetch SUITE PKG DIR                   # the candidate .deb of PKG into DIR; prints its path
#
# SUITE's list file and state live in $cache/apt/SUITE/ (cache: the caller's SMCRUN_VM_CACHE): the
# machine's own mirror URI (the first `URIs:` or `deb` line of /etc/apt/sources.list{,.d}) with the
# suite changed, plus SUITE-security for a release that is no longer stable (its kernels are updated
# there). The lists are refreshed when they are missing or a day old. Errors go to stderr; a function
# that fails returns non-zero.

# suite_mirror KIND: the machine's mirror URI for KIND (debian or debian-security).
suite_mirror() {
    local kind=$1 uri
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk -v k="$kind" '
            { for (i = 1; i <= NF; i++) if ($i ~ /^https?:\/\//) { u = $i; sub(/\/+$/, "", u); n = split(u, p, "/");
                if (p[n] == k && !v) v = u } }
            END { if (v) print v }')
    echo "${uri:-http://deb.debian.org/$kind}"
}

# suite_dir SUITE: make SUITE's list file and state folder; prints the folder.
suite_dir() {
    local suite=$1 d=$cache/apt/$1 keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    mkdir -p "$d/lists/partial" "$d/archives/partial"
    {
        echo "deb [signed-by=$keyring] $(suite_mirror debian) $suite main"
        case $suite in
        *-backports | *-updates | *-security) ;;
        *) echo "deb [signed-by=$keyring] $(suite_mirror debian-security) $suite-security main" ;;
        esac
    } > "$d/sources.list.new"
    mv "$d/sources.list.new" "$d/sources.list"
    echo "$d"
}

suite_apt() {
    local suite=$1 tool=$2 d
    shift 2
    d=$(suite_dir "$suite")
    "$tool" -o Dir::Etc::sourcelist="$d/sources.list" -o Dir::Etc::sourceparts=- \
        -o Dir::State::Lists="$d/lists" -o Dir::Cache="$d" -o Dir::Cache::archives="$d/archives" \
        -o APT::Sandbox::User=root -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false \
        -o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false "$@"
}

# suite_update SUITE: apt-get update for SUITE when its lists are missing or more than a day old.
suite_update() {
    local suite=$1 d
    d=$(suite_dir "$suite")
    if [ -z "$(find "$d/lists" -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | head -n1)" ]; then
        echo "vm: apt-get update for $suite (own list file $d/sources.list)" >&2
        suite_apt "$suite" apt-get update -q >/dev/null || { echo "vm: apt-get update of $suite failed" >&2; return 1; }
    fi
}

# suite_fetch SUITE PKG DIR: download PKG's candidate version from SUITE into DIR (unless that exact
# version is there) and print the .deb's path. Offline (no candidate), the newest PKG_*.deb in DIR is
# used with a warning.
suite_fetch() {
    local suite=$1 pkg=$2 dir=$3 ver deb
    suite_update "$suite" || true
    ver=$(suite_apt "$suite" apt-cache policy "$pkg" 2>/dev/null | awk '$1 == "Candidate:" && !v { v = $2 } END { if (v) print v }')
    if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then
        deb=$(find "$dir" -maxdepth 1 -name "${pkg}_*.deb" | sort -V | tail -n1)
        [ -n "$deb" ] || { echo "vm: $suite has no $pkg and none is cached in $dir" >&2; return 1; }
        echo "vm: WARNING: cannot resolve $pkg in $suite; using cached $(basename "$deb")" >&2
        echo "$deb"
        return 0
    fi
    deb="$dir/${pkg}_${ver//:/%3a}_$(suite_apt "$suite" apt-cache show "$pkg=$ver" 2>/dev/null | awk '$1 == "Architecture:" && !a { a = $2 } END { print a }').deb"
    if [ ! -s "$deb" ]; then
        echo "vm: downloading $pkg $ver from $suite into $dir" >&2
        (cd "$dir" && suite_apt "$suite" apt-get download -q "$pkg=$ver" >/dev/null) ||
            { echo "vm: apt-get download $pkg=$ver from $suite failed" >&2; return 1; }
        [ -s "$deb" ] || { echo "vm: downloaded $pkg but $deb is missing" >&2; return 1; }
    fi
    echo "$deb"
}
