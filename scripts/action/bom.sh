#!/usr/bin/env bash
# Writes the ML bill of materials (CycloneDX 1.6) of the models the pull request changes, for
# the GitHub Action's `bom` input: every changed model as the head has it (`HEAD:path`, files
# hashed by their LFS oids, nothing downloaded), and, when one model changed and the base had
# it, the base's version under pedigree.ancestors with the relation `relate` finds.
#
# Inputs (environment): WI_BIN (the binary), WI_BOM (the file to write, relative to the
# workspace), WI_REPORT (the JSON report `ci` wrote), WI_BASE and WI_HEAD (commits). The step
# output `bom` is its absolute path. Exits 0, or 2 when the BOM could not be written.
set -euo pipefail

: "${WI_BIN:?WI_BIN must name the weight-inspect binary}"
# No `bom` input: nothing to write (the step is skipped by its `if`, and says so here too).
[ -n "${WI_BOM:-}" ] || exit 0
: "${WI_REPORT:?WI_REPORT must name the ci JSON report}"
head=${WI_HEAD:-HEAD}

models=()
bases=()
while IFS=$'\t' read -r new old status; do
    [ -n "$new" ] || continue
    models+=("$head:$new")
    if [ "$status" != "added" ] && [ -n "$old" ] && [ -n "${WI_BASE:-}" ]; then
        bases+=("$WI_BASE:$old")
    fi
done < <(jq -r '.files[] | select(.status != "deleted" and .new_path != null)
    | [.new_path, (.old_path // ""), .status] | @tsv' "$WI_REPORT")

args=(bom --output "$WI_BOM")
if [ "${#models[@]}" -eq 1 ] && [ "${#bases[@]}" -eq 1 ]; then
    args+=(--base "${bases[0]}")
fi
if [ "${#models[@]}" -eq 0 ]; then
    echo "weight-inspect: no model changed: no BOM written" >&2
    exit 0
fi
"$WI_BIN" --color never "${args[@]}" -- "${models[@]}"
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf 'bom=%s\n' "$(cd "$(dirname -- "$WI_BOM")" && pwd)/$(basename -- "$WI_BOM")" >>"$GITHUB_OUTPUT"
fi
