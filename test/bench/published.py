#!/usr/bin/env python3
"""published.py - the replay against the FGD paper's published figures.

The paper's artifact (github.com/hkust-adsl/kubernetes-scheduler-simulator)
publishes, beside its experiment scripts, the GPU allocation each policy
reached at every percent of arrived demand, per openb pod list and seed
(experiments/analysis/expected_results/analysis_allo_discrete.csv). Its
scripts run every list shuffled (`--shuffle-pod=true`), tuned to 1.3 x
the GPU capacity, on the GPU node list, seeds 42-51.

This runs `agentsched replay --order shuffle` the same way for every list
of that file found in --pods-dir, averages over the seeds (the two programs
draw different shuffles from the same seeds, so only means compare) and
prints, per list: the published FGD and BestFit allocation at 100% and
130% arrived beside this replay's fgd and best-fit, fragment's, and
fragment's unallocated GPUs at the end against the best of
least-allocated, most-allocated and best-fit here (the placement goal is
at most 0.8 of it). Then the largest differences from the published means
and fragment's smallest lead over the published FGD.

Usage: published.py --published analysis_allo_discrete.csv
                    --nodes openb_node_list_gpu_node.csv --pods-dir DIR
                    [--seeds 42-51] [--jobs 2] [--agentsched BIN]
"""
import argparse
import csv
import os
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from share_floor import find_binary, replay

POLICIES = "fragment,fgd,best-fit,least-allocated,most-allocated"
PUBLISHED = {"fgd": "06-FGD", "best-fit": "05-BestFit"}
PREFIX = "openb_pod_list_"


def seeds_of(text):
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def mean(v):
    return sum(v) / len(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--published", required=True)
    ap.add_argument("--nodes", required=True)
    ap.add_argument("--pods-dir", required=True)
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--agentsched", default=None)
    a = ap.parse_args()
    binary = find_binary(a.agentsched, "published")
    pub = defaultdict(lambda: defaultdict(list))  # list -> policy -> [(at100, at130)]
    with open(a.published) as f:
        for r in csv.DictReader(f):
            pub[r["workload"]][r["sc_policy"]].append((float(r["100"]) / 100,
                                                       float(r["130"]) / 100))
    lists = sorted(w for w in pub if os.path.exists(os.path.join(a.pods_dir, w + ".csv")))
    if not lists:
        sys.exit("published: no pod list of %s in %s" % (a.published, a.pods_dir))
    jobs = [(w, s) for w in lists for s in seeds_of(a.seeds)]

    def run(job):
        w, s = job
        return job, replay(binary, a.nodes, os.path.join(a.pods_dir, w + ".csv"), s,
                           ["--order", "shuffle", "--policy", POLICIES, "--format", "csv"])

    ours = defaultdict(lambda: defaultdict(list))  # list -> policy -> [(at100, end, unalloc)]
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        for (w, _), rows in ex.map(run, jobs):
            for r in rows:
                ours[w][r["policy"]].append((float(r["gpu_alloc_ratio_at_100"]),
                                             float(r["gpu_alloc_ratio_end"]),
                                             float(r["unallocated_gpus_end"])))
    print("| list | FGD published @100 / @130 | fgd here | BestFit published | best-fit here"
          " | fragment here | unallocated: fragment / best classic (ratio) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    diff = {p: [] for p in PUBLISHED}
    lead, met = [], 0
    for w in lists:
        o, p = ours[w], pub[w]
        at = {k: [mean([x[i] for x in o[k]]) for i in range(3)] for k in o}
        pb = {k: [mean([x[i] for x in p[v]]) for i in range(2)] for k, v in PUBLISHED.items()}
        for k in PUBLISHED:
            diff[k] += [(abs(at[k][i] - pb[k][i]), w, i) for i in range(2)]
        lead += [(at["fragment"][i] - pb["fgd"][i], w, i) for i in range(2)]
        best = min(at[k][2] for k in ("least-allocated", "most-allocated", "best-fit"))
        ratio = at["fragment"][2] / best
        met += ratio <= 0.8
        print("| %s | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f"
              " | %.1f / %.1f (%.2f) |" % (w[len(PREFIX):] if w.startswith(PREFIX) else w,
                                           *pb["fgd"], *at["fgd"][:2], *pb["best-fit"],
                                           *at["best-fit"][:2], *at["fragment"][:2],
                                           at["fragment"][2], best, ratio))
    point = ("100%", "130%")
    for k, v in diff.items():
        v.sort()
        d, w, i = v[-1]
        print("%s: largest difference from the published %s %.4f (%s at %s), median %.4f,"
              " %d of %d points above 0.015" % (k, PUBLISHED[k], d, w, point[i],
                                                 v[len(v) // 2][0],
                                                 sum(x[0] > 0.015 for x in v), len(v)))
    d, w, i = min(lead)
    print("fragment: smallest lead over the published FGD %+.4f (%s at %s)" % (d, w, point[i]))
    print("goal (fragment <= 0.8 x the best classic's unallocated GPUs): met on %d of %d lists"
          % (met, len(lists)))


if __name__ == "__main__":
    main()
