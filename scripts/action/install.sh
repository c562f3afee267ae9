#!/usr/bin/env bash
# Installs weight-inspect for the GitHub Action.
#
#   install.sh plan     prints/outputs the install directory and the cache key (for actions/cache)
#   install.sh          installs, prints the binary's path, outputs `bin`, `version`, `source`
#
# Where the binary comes from, first match wins (`source` output):
#   given     WEIGHT_INSPECT_BIN names a binary to use as is
#   cache     the install directory already holds the wanted version (restored by actions/cache)
#   path      `weight-inspect` on PATH is the wanted version
#   prebuilt  the release asset for x86_64 Linux, checked against its .sha256
#             (URL overridable with WEIGHT_INSPECT_DOWNLOAD_URL)
#   cargo     cargo install --locked --path "$GITHUB_ACTION_PATH" --root DIR
#             (WEIGHT_INSPECT_INSTALL_DRY_RUN=1 prints that command instead of running it)
#
# Inputs (environment): WI_VERSION (empty: the version of the action's own Cargo.toml),
# WI_REPOSITORY (owner/name of the action, for the release URL), GITHUB_ACTION_PATH,
# WEIGHT_INSPECT_INSTALL_DIR (default: $RUNNER_TOOL_CACHE/weight-inspect/VERSION-SOURCEHASH).
set -euo pipefail

say() { printf 'weight-inspect install: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

output() {
    if [ -n "${GITHUB_OUTPUT:-}" ]; then
        printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"
    fi
}

# macOS has shasum instead of sha256sum.
sha256() {
    if command -v sha256sum >/dev/null 2>&1; then sha256sum "$@"; else shasum -a 256 "$@"; fi
}

action_path=${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/../.." && pwd)}
[ -f "$action_path/Cargo.toml" ] || die "$action_path/Cargo.toml not found (GITHUB_ACTION_PATH)"
source_version=$(sed -n 's/^version = "\([^"]*\)"$/\1/p' "$action_path/Cargo.toml" | head -n 1)
[ -n "$source_version" ] || die "no version in $action_path/Cargo.toml"

wanted=${WI_VERSION:-}
wanted=${wanted#v}
[ -n "$wanted" ] || wanted=$source_version

# The sources identify a build from source; a cached binary built from other sources (the
# action used at a branch that moved) is not reused.
source_hash=$(
    cd "$action_path" && {
        find Cargo.toml Cargo.lock src -type f | LC_ALL=C sort
        find Cargo.toml Cargo.lock src -type f -print0 | LC_ALL=C sort -z | xargs -0 cat
    } | sha256 | cut -c1-16
)
root=${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}}
dir=${WEIGHT_INSPECT_INSTALL_DIR:-$root/weight-inspect/$wanted-$source_hash}
cache_key="weight-inspect-${RUNNER_OS:-$(uname -s)}-${RUNNER_ARCH:-$(uname -m)}-$wanted-$source_hash"

if [ "${1:-}" = plan ]; then
    output dir "$dir"
    output cache-key "$cache_key"
    output version "$wanted"
    printf 'dir=%s\ncache-key=%s\nversion=%s\n' "$dir" "$cache_key" "$wanted"
    exit 0
fi

# `weight-inspect 0.1.0` -> `0.1.0`; empty if the binary does not run.
version_of() {
    "$1" --version 2>/dev/null | sed -n 's/^weight-inspect \([^ ]*\)$/\1/p' | head -n 1
}

done_with() {
    local bin=$1 source=$2
    local version
    version=$(version_of "$bin")
    [ -n "$version" ] || die "$bin does not run (\`$bin --version\` failed)"
    say "using $bin ($version, $source)"
    output bin "$bin"
    output version "$version"
    output source "$source"
    if [ -n "${GITHUB_PATH:-}" ]; then
        dirname "$bin" >>"$GITHUB_PATH"
    fi
    printf '%s\n' "$bin"
    exit 0
}

if [ -n "${WEIGHT_INSPECT_BIN:-}" ]; then
    [ -x "$WEIGHT_INSPECT_BIN" ] || die "WEIGHT_INSPECT_BIN=$WEIGHT_INSPECT_BIN is not an executable file"
    done_with "$WEIGHT_INSPECT_BIN" given
fi

installed="$dir/bin/weight-inspect"
if [ -x "$installed" ] && [ "$(version_of "$installed")" = "$wanted" ]; then
    done_with "$installed" cache
fi

if on_path=$(command -v weight-inspect 2>/dev/null) && [ "$(version_of "$on_path")" = "$wanted" ]; then
    done_with "$on_path" path
fi

# The release workflow (.github/workflows/release.yml) attaches this asset to tag v$VERSION.
asset=weight-inspect-x86_64-unknown-linux-musl.tar.gz
url=${WEIGHT_INSPECT_DOWNLOAD_URL:-}
if [ -z "$url" ] && [ -n "${WI_REPOSITORY:-}" ]; then
    url="https://github.com/$WI_REPOSITORY/releases/download/v$wanted/$asset"
fi
platform="$(uname -s)-$(uname -m)"
if [ -n "$url" ] && [ "$platform" = Linux-x86_64 ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    if curl -fsSL --retry 2 --connect-timeout 20 -o "$tmp/asset.tar.gz" "$url" 2>"$tmp/err" &&
        curl -fsSL --retry 2 --connect-timeout 20 -o "$tmp/asset.sha256" "$url.sha256" 2>>"$tmp/err"; then
        expected=$(cut -d ' ' -f 1 <"$tmp/asset.sha256")
        actual=$(sha256 "$tmp/asset.tar.gz" | cut -d ' ' -f 1)
        [ "$expected" = "$actual" ] || die "checksum mismatch for $url: expected $expected, got $actual"
        mkdir -p "$tmp/x"
        tar -xzf "$tmp/asset.tar.gz" -C "$tmp/x"
        [ -f "$tmp/x/weight-inspect" ] || die "$url holds no weight-inspect binary"
        got=$(version_of "$tmp/x/weight-inspect")
        [ "$got" = "$wanted" ] || die "$url holds weight-inspect '$got', expected $wanted"
        mkdir -p "$dir/bin"
        install -m 0755 "$tmp/x/weight-inspect" "$installed"
        done_with "$installed" prebuilt
    fi
    say "no prebuilt binary at $url ($(tr '\n' ' ' <"$tmp/err")); building from source"
elif [ -n "$url" ]; then
    say "no prebuilt binary for $platform; building from source"
fi

# Building from source only makes the version the action's sources are.
if [ "$wanted" != "$source_version" ]; then
    die "no prebuilt binary of version $wanted, and the action's sources are version \
$source_version: use the action at the matching tag (uses: OWNER/weight-inspect@v$wanted) or leave \`version\` empty"
fi
cmd=(cargo install --locked --path "$action_path" --root "$dir")
if [ -n "${WEIGHT_INSPECT_INSTALL_DRY_RUN:-}" ]; then
    printf 'would run:'
    printf ' %q' "${cmd[@]}"
    printf '\n'
    exit 0
fi
command -v cargo >/dev/null 2>&1 ||
    die "cargo not found: add a Rust toolchain to the job (e.g. dtolnay/rust-toolchain@stable) or use a released version"
say "building from source: ${cmd[*]}"
"${cmd[@]}" >&2
done_with "$installed" cargo
