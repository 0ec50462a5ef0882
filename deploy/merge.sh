#!/usr/bin/env bash
# packfs sharded ingest, last step: the entrypoint of the Job in
# deploy/k8s/merge-job.yaml. Union-merges branches shard-0 … shard-(SHARDS-1)
# into main in one Manifest, then verifies the dataset.
#
# Environment: DATASET, SHARDS, PACKFS [packfs], PACKFS_ARGS (see
# deploy/ingest.sh).
set -euo pipefail

dataset=${DATASET:?DATASET is the dataset location}
shards=${SHARDS:?SHARDS is the number of shards}
packfs=${PACKFS:-packfs}
read -r -a extra <<< "${PACKFS_ARGS:-}"

branches=()
for ((i = 0; i < shards; i++)); do
    branches+=("shard-$i")
done
"$packfs" "${extra[@]}" merge "$dataset" --into main "${branches[@]}"
"$packfs" "${extra[@]}" verify "$dataset"
