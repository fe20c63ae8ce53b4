#!/usr/bin/env python3
"""Parses an OpenMetrics page with prometheus_client's strict OpenMetrics parser (python3-prometheus-client,
an implementation independent of aerie's) and prints what the tests compare, as JSON:
{"families": {name: type}, "exemplars": [{"sample", "labels", "exemplar", "value", "timestamp"}]}.
Exit 1 with the parser's message when the page is not valid OpenMetrics; 77 when the module is missing."""
import json
import sys

try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
except ImportError:
    sys.exit(77)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        page = f.read()
    families = {}
    exemplars = []
    try:
        for family in text_string_to_metric_families(page):
            families[family.name] = family.type
            for s in family.samples:
                if s.exemplar is not None:
                    exemplars.append({"sample": s.name, "labels": s.labels, "exemplar": s.exemplar.labels,
                                      "value": s.exemplar.value,
                                      "timestamp": float(s.exemplar.timestamp) if s.exemplar.timestamp is not None else None})
    except Exception as e:  # the parser raises ValueError (and others) on invalid input
        print(f"invalid OpenMetrics: {e}", file=sys.stderr)
        sys.exit(1)
    json.dump({"families": families, "exemplars": exemplars}, sys.stdout)


if __name__ == "__main__":
    main()
