#!/usr/bin/env bash
# Runs `weight-inspect ci` for the GitHub Action: the summary goes to $GITHUB_STEP_SUMMARY,
# the outputs to $GITHUB_OUTPUT, the JSON report to $RUNNER_TEMP, annotations to the log.
#
# Inputs (environment): WI_BIN (the binary), WI_BASE and WI_HEAD (commits), WI_POLICY (a
# policy file, or empty for .weight-inspect.toml when it exists), WI_FAIL_ON
# (violation|violation-any|change|never), WI_PATHS (paths, directories or globs, one per line), WI_VALUES
# (`true` to compare weight values too), WI_TOKEN and WI_SERVER_URL (a token for the LFS server
# of the repository on that server: LFS objects the checkout did not fetch have their headers
# read from it), WI_SARIF (a SARIF file to write, or empty; its path becomes the step output
# `sarif`), WI_REFERENCE (with WI_VALUES: the model the changed GGUF files beside it were
# converted from, repository-relative; each is compared with it as a conversion), WI_HTML (an
# HTML report to write, or empty: the step output `html` is its absolute path, and the job
# summary says where the run's artifacts are, for the workflow's upload-artifact step).
# Exits with weight-inspect's status: 0 pass, 1 failed per fail-on, 2 error.
set -euo pipefail

: "${WI_BIN:?WI_BIN must name the weight-inspect binary}"
: "${WI_BASE:?WI_BASE must name the base commit}"

report_dir=${RUNNER_TEMP:-${TMPDIR:-/tmp}}
args=(ci --base "$WI_BASE" --head "${WI_HEAD:-HEAD}" --fail-on "${WI_FAIL_ON:-violation}"
    --annotations --json "$report_dir/weight-inspect-${GITHUB_ACTION:-report}.json")
if [ -n "${WI_POLICY:-}" ]; then
    args+=(--policy "$WI_POLICY")
fi
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    args+=(--summary "$GITHUB_STEP_SUMMARY")
fi
if [ "${WI_VALUES:-false}" = "true" ]; then
    args+=(--values)
    if [ -n "${WI_REFERENCE:-}" ]; then
        args+=(--reference "$WI_REFERENCE")
    fi
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    args+=(--outputs "$GITHUB_OUTPUT")
fi
if [ -n "${WI_SARIF:-}" ]; then
    args+=(--sarif "$WI_SARIF")
    if [ -n "${GITHUB_OUTPUT:-}" ]; then
        printf 'sarif=%s\n' "$WI_SARIF" >>"$GITHUB_OUTPUT"
    fi
fi
if [ -n "${WI_HTML:-}" ]; then
    args+=(--html "$WI_HTML")
fi
args+=(--)
while IFS= read -r line; do
    # Trim surrounding blanks; skip empty lines.
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line%"${line##*[![:space:]]}"}"
    if [ -n "$line" ]; then
        args+=("$line")
    fi
done <<<"${WI_PATHS:-}"

# The token goes where actions/checkout puts it (an extra header for the server's URL), for
# this process only, unless the checkout already left credentials there.
if [ -n "${WI_TOKEN:-}" ] && [ -n "${WI_SERVER_URL:-}" ] &&
    [ -z "$(git config --get-urlmatch http.extraheader "$WI_SERVER_URL/" 2>/dev/null || true)" ]; then
    basic=$(printf 'x-access-token:%s' "$WI_TOKEN" | base64 | tr -d '\n')
    echo "::add-mask::$basic"
    count=${GIT_CONFIG_COUNT:-0}
    export "GIT_CONFIG_KEY_$count=http.$WI_SERVER_URL/.extraheader"
    export "GIT_CONFIG_VALUE_$count=AUTHORIZATION: basic $basic"
    export GIT_CONFIG_COUNT=$((count + 1))
fi

status=0
"$WI_BIN" --color never "${args[@]}" || status=$?

# The summary points to the HTML report where the workflow uploads it: the run's artifacts.
if [ -n "${WI_HTML:-}" ] && [ -f "$WI_HTML" ] && [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    name=$(basename -- "$WI_HTML" | sed 's/[][`*_<>&|\\]/\\&/g')
    if [ -n "${GITHUB_SERVER_URL:-}" ] && [ -n "${GITHUB_REPOSITORY:-}" ] && [ -n "${GITHUB_RUN_ID:-}" ]; then
        where="[the run's artifacts](${GITHUB_SERVER_URL}/${GITHUB_REPOSITORY}/actions/runs/${GITHUB_RUN_ID}#artifacts)"
    else
        where="the run's artifacts"
    fi
    printf '\n**HTML report** (per-layer heatmap, sortable table): %s, in %s once the workflow uploads it with `actions/upload-artifact`.\n' \
        "$name" "$where" >>"$GITHUB_STEP_SUMMARY"
fi
exit "$status"
