"""Reads tar shards with the `webdataset` library, as a training loader
would, and prints every sample it yields: one line per member,
`<shard>\t<__key__>\t<extension>\t<sha256 of the bytes>`.

Used by tests/clients/views.rs to check packfs's WebDataset view against the
library itself (run with the venv `.ci/run` creates)."""

import hashlib
import sys

import webdataset as wds


def main(shards):
    dataset = wds.WebDataset(shards, shardshuffle=False, empty_check=False)
    for sample in dataset:
        for ext, data in sorted(sample.items()):
            if ext.startswith("__"):
                continue
            digest = hashlib.sha256(data).hexdigest()
            print(f"{sample['__url__']}\t{sample['__key__']}\t{ext}\t{digest}")


if __name__ == "__main__":
    main(sys.argv[1:])
