#!/usr/bin/env bash
# Benchmarks the grep and find tools against rg and fd on a generated tree of 50,000+ files.
# Installs ripgrep and fd-find with apt-get when missing; without them, nova is timed alone.
set -u
cd "$(dirname "$0")/.."

missing=()
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
command -v fd >/dev/null 2>&1 || command -v fdfind >/dev/null 2>&1 || missing+=(fd-find)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
    echo "installing ${missing[*]}" >&2
    if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}"; } >&2; then
        echo "could not install ${missing[*]}; timing nova alone" >&2
    fi
fi

exec cargo bench --bench search
