#!/usr/bin/env bash
# packfs sharded ingest, one shard: the entrypoint of each pod of the
# Indexed Job in deploy/k8s/ingest-job.yaml (seed
# dreamdb-sharded-ingest-union-merge: N workers import disjoint shards
# into branches of their own, then one union merge; deploy/merge.sh).
#
# Shard INDEX of SHARDS takes every SHARDS-th line of the listing (lines
# INDEX, INDEX+SHARDS, …): paths relative to SOURCE_ROOT, laid out as
# <timeline>/<modality>/<name…>. They are imported into branch
# shard-INDEX of DATASET, which starts at main (created empty if the
# dataset has none, so every branch has main as common ancestor).
#
# Safe to run again (a retried pod): the branch is reused and objects
# already stored are not uploaded twice.
#
# Environment:
#   DATASET               dataset location (s3://bucket/prefix, …)
#   SOURCE_ROOT           directory the listing's paths are under
#   SOURCE_LISTING        file with one relative path per line
#   SHARDS                number of shards (the Job's completions)
#   JOB_COMPLETION_INDEX  this shard (Kubernetes sets it in Indexed Jobs)
#   PACKFS                packfs binary [packfs]
#   PACKFS_ARGS           extra arguments for every packfs command, e.g.
#                         "--endpoint http://minio:9000 --path-style"
set -euo pipefail

dataset=${DATASET:?DATASET is the dataset location}
root=${SOURCE_ROOT:?SOURCE_ROOT is the directory the listing names files in}
listing=${SOURCE_LISTING:?SOURCE_LISTING is the file listing the source}
shards=${SHARDS:?SHARDS is the number of shards}
index=${JOB_COMPLETION_INDEX:?JOB_COMPLETION_INDEX is this shard (set by an Indexed Job)}
packfs=${PACKFS:-packfs}
read -r -a extra <<< "${PACKFS_ARGS:-}"
branch="shard-$index"

if ! [[ "$shards" =~ ^[1-9][0-9]*$ && "$index" =~ ^[0-9]+$ && "$index" -lt "$shards" ]]; then
    echo "ingest: shard $index of $shards is not a shard" >&2
    exit 2
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# This shard's files, linked into a tree import reads (it follows links).
count=0
while IFS= read -r path || [ -n "$path" ]; do
    [ -n "$path" ] || continue
    if [ $((count % shards)) -eq "$index" ]; then
        case "$path" in
            /* | ../* | */../* | */..) echo "ingest: $listing: $path leaves SOURCE_ROOT" >&2; exit 2 ;;
        esac
        [ -f "$root/$path" ] || { echo "ingest: $root/$path: no such file" >&2; exit 1; }
        mkdir -p "$stage/$(dirname "$path")"
        ln -s "$root/$path" "$stage/$path"
    fi
    count=$((count + 1))
done < "$listing"
echo "ingest: shard $index of $shards: $(find "$stage" -type l | wc -l) of $count files into $dataset ref $branch" >&2

# main, empty, if the dataset has none yet; a second creator merges or
# finds it there.
empty="$stage/.empty"
mkdir -p "$empty"
"$packfs" "${extra[@]}" import "$empty" "$dataset" --ref main --no-progress >&2
if ! out=$("$packfs" "${extra[@]}" branch "$dataset" "$branch" --from main 2>&1); then
    case "$out" in
        *"already exists"*) echo "ingest: reusing branch $branch" >&2 ;;
        *) echo "$out" >&2; exit 1 ;;
    esac
fi
rm -rf "$empty"
"$packfs" "${extra[@]}" import "$stage" "$dataset" --ref "$branch" --no-progress
