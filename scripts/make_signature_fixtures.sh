#!/bin/sh
# Remakes tests/fixtures/signatures: one venv per model_signing release (outside the
# repository, under VENVS, default /work/wt/venvs or $1), each with that release and the
# packages pinned in tests/fixtures/signatures/vVERSION/requirements.txt, running
# scripts/make_signature_fixtures.py. Releases up to 1.0.1 need sigstore 3.x (they import
# sigstore_protobuf_specs, which sigstore 4 dropped), which those pins hold.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
venvs=${1:-${VENVS:-/work/wt/venvs}}
out="$repo/tests/fixtures/signatures"
for version in 0.2.0 0.3.1 1.0.0 1.0.1 1.1.0 1.1.1; do
    venv="$venvs/ms-$version"
    pins="$out/v$version/requirements.txt"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    if [ -f "$pins" ]; then
        "$venv/bin/pip" install -q -r "$pins"
    else
        # First run: the release, sigstore 3.x where it needs it, and what the generator uses
        # (pyOpenSSL: model_signing imports it without declaring it); the freeze pins them.
        case $version in 1.1.*) extra= ;; *) extra=sigstore==3.6.7 ;; esac
        "$venv/bin/pip" install -q "model-signing==$version" $extra cryptography pyOpenSSL
    fi
    "$venv/bin/python" "$repo/scripts/make_signature_fixtures.py" "$out"
    "$venv/bin/pip" freeze --exclude-editable | grep -v '^pip==' > "$pins"
done
