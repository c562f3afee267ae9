#!/usr/bin/env bash
# Makes sure the base and head commits of the comparison are in the local repository,
# fetching them when the checkout is shallow (actions/checkout fetches one commit by default).
# Only the commits themselves are needed (their trees are compared), never the history between.
#
# The base, first match wins:
#   WI_BASE_INPUT     the action's `base` input (a commit id or a ref name)
#   the merge commit  on a pull request, when the head is GitHub's merge commit (second parent
#                     WI_PR_HEAD_SHA, as actions/checkout checks out by default): its first
#                     parent, the base GitHub merged into (pull_request.base.sha goes stale when
#                     the base branch moves on)
#   WI_PR_BASE_SHA    github.event.pull_request.base.sha (the pull request head checked out)
#   GITHUB_BASE_REF   the pull request's target branch (fetched as refs/remotes/REMOTE/BRANCH)
#   WI_PUSH_BEFORE    github.event.before (the tip before a push; all zeros for a new branch)
#   otherwise         the first parent of the head commit
# WI_HEAD is the head revision (default HEAD), WI_REMOTE the remote to fetch from (default origin).
#
# Prints `base=SHA` and `head=SHA`, and writes them to $GITHUB_OUTPUT.
set -euo pipefail

say() { printf 'weight-inspect base: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

remote=${WI_REMOTE:-origin}
head_rev=${WI_HEAD:-HEAD}

commit_of() {
    git rev-parse --verify --quiet --end-of-options "$1^{commit}" 2>/dev/null
}

is_sha() {
    [[ $1 =~ ^[0-9a-f]{40}([0-9a-f]{24})?$ ]]
}

fetch() {
    say "fetching: git fetch --no-tags --no-recurse-submodules $*"
    git -c protocol.version=2 fetch --quiet --no-tags --no-recurse-submodules "$@" >&2
}

# Resolves a revision, fetching it (one commit deep, plus `extra` depth) when it is missing.
ensure() {
    local rev=$1 kind=$2 sha
    if sha=$(commit_of "$rev"); then
        printf '%s\n' "$sha"
        return
    fi
    case $kind in
    branch)
        local branch=${rev#refs/remotes/"$remote"/}
        fetch --depth=1 "$remote" "+refs/heads/$branch:refs/remotes/$remote/$branch" ||
            die "cannot fetch branch $branch from $remote"
        ;;
    parent)
        # REV^ of a shallow clone: fetch REV two commits deep.
        local child=${rev%^}
        local child_sha
        child_sha=$(commit_of "$child") || die "$child is not a commit"
        fetch --depth=2 "$remote" "$child_sha" ||
            die "cannot fetch the parent of $child_sha from $remote"
        sha=$(commit_of "$rev") ||
            die "$child_sha has no parent commit: give the action a \`base\` to compare with"
        printf '%s\n' "$sha"
        return
        ;;
    *)
        if is_sha "$rev"; then
            fetch --depth=1 "$remote" "$rev" || die "cannot fetch commit $rev from $remote"
        else
            # A branch or tag name: fetch it under a ref of its own so that it resolves.
            local ref=refs/weight-inspect/base
            fetch --depth=1 "$remote" "+$rev:$ref" || die "cannot fetch $rev from $remote"
            rev=$ref
        fi
        ;;
    esac
    sha=$(commit_of "$rev") || die "$rev is not a commit even after fetching it"
    printf '%s\n' "$sha"
}

git rev-parse --git-dir >/dev/null 2>&1 || die "$(pwd) is not a git repository (run actions/checkout first)"

head_sha=$(ensure "$head_rev" input)

# The parents recorded in the head commit (known even when a shallow clone lacks them).
# (`read -a`, not mapfile: macOS runners have bash 3.2.)
parent_list=$(git cat-file commit "$head_sha" | sed -n '/^$/q; s/^parent //p' | tr '\n' ' ')
read -r -a parents <<<"$parent_list" || true

zeros='^0+$'
if [ -n "${WI_BASE_INPUT:-}" ]; then
    base_sha=$(ensure "$WI_BASE_INPUT" input)
elif [ -n "${WI_PR_HEAD_SHA:-}" ] && [ "${#parents[@]}" -eq 2 ] && [ "${parents[1]}" = "$WI_PR_HEAD_SHA" ]; then
    base_sha=$(ensure "${parents[0]}" input)
elif [ -n "${WI_PR_BASE_SHA:-}" ]; then
    base_sha=$(ensure "$WI_PR_BASE_SHA" input)
elif [ -n "${GITHUB_BASE_REF:-}" ]; then
    base_sha=$(ensure "refs/remotes/$remote/$GITHUB_BASE_REF" branch)
elif [ -n "${WI_PUSH_BEFORE:-}" ] && ! [[ $WI_PUSH_BEFORE =~ $zeros ]]; then
    base_sha=$(ensure "$WI_PUSH_BEFORE" input)
else
    base_sha=$(ensure "$head_sha^" parent)
fi

say "comparing $base_sha..$head_sha"
printf 'base=%s\nhead=%s\n' "$base_sha" "$head_sha"
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf 'base=%s\nhead=%s\n' "$base_sha" "$head_sha" >>"$GITHUB_OUTPUT"
fi
