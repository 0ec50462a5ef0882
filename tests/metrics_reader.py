"""Scrapes a packfs mount's metrics endpoint and parses the text with the
Prometheus project's Python client (`prometheus_client`, its OpenMetrics
parser: packfs serves OpenMetrics text). Prints one line per sample:
`<name>\t<labels as k=v,k=v sorted>\t<value>`; fails on anything the
parser rejects. Used by tests/clients/metrics.rs (venv made by .ci/run)."""

import sys
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families


def main(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        content_type = response.headers.get("Content-Type", "")
        if not content_type.startswith("application/openmetrics-text"):
            sys.exit(f"unexpected Content-Type {content_type!r}")
        text = response.read().decode("utf-8")
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            print(f"{sample.name}\t{labels}\t{sample.value}")


if __name__ == "__main__":
    main(sys.argv[1])
