#!/usr/bin/env python3
"""share_floor.py - what device choice alone can do for GPU-sharing pods.

Takes the arrival order `agentsched replay` uses for a pod list (its
--placements output: the trace in order, then pods sampled until the
arrived GPU demand is 1.3 x capacity) and places only the GPU demand, on
the cluster's devices as one pool, with nothing else in the way: no CPU,
no memory, no node, no GPU model. A pod takes its device by one of four
rules, the moment it arrives, as any scheduler must:

  best-fit        the device with the least free milli that holds it
                  (agentsched's device choice, and the published baseline's)
  expected-waste  the device whose free milli after the pod wastes least,
                  a remainder f counting f x P(a demand > f) over the
                  list's own share demands (fragment's partial-device term)
  sum-of-squares  the device whose remainder keeps the sum of squared
                  counts of devices per free milli smallest (Csirik et al.,
                  online bin packing for discrete sizes)
  worst-fit       the device with the most free milli (spreading)
  fresh-first T   a wholly free device while any is left, unless best fit
                  leaves at most T milli (T = 0, 60): small shares use up
                  the free devices, so the large shares that leave an
                  unfillable remainder find none sooner

Whole-GPU pods take wholly free devices. Prints, per rule, the GPU
allocation when the arrived GPU demand reaches the capacity (100%
arrived), the GPUs left unallocated at the end and the pods refused,
beside the unallocated GPUs of the published baselines (least-allocated,
most-allocated, best-fit) in the full replay, 0.8 x the best of them (the
placement-quality goal) and fgd's allocation at 100% arrived (the other
goal: at least that). When every rule here leaves more than the goal, or
reaches it only below fgd at 100%, no choice of device meets both on this
pod mix (the real replays add CPU and memory limits).

Usage: share_floor.py [--agentsched BIN] --nodes NODES.csv --pods PODS.csv
                      [--seed S]
"""
import argparse
import csv
import io
import os
import subprocess
import sys
from collections import Counter

FULL = 1000


def replay(binary, nodes, pods, seed, extra):
    cmd = [binary, "replay", "--nodes", nodes, "--pods", pods, "--seed", str(seed)] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return list(csv.DictReader(io.StringIO(out)))


def find_binary(given, tool):
    """agentsched: given, else the Release build's, else the default build's."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for b in (given, os.path.join(repo, "build-rel", "agentsched"),
              os.path.join(repo, "build", "agentsched")):
        if b and os.access(b, os.X_OK):
            return b
    sys.exit("%s: build agentsched first (or pass --agentsched)" % tool)


def demand_of(row):
    """(devices, milli per device): (1, m) for a share, (n, 1000) whole."""
    n = int(row["num_gpu"])
    if n == 0:
        return None
    m = int(row["gpu_milli"]) if n == 1 else FULL
    return (1, m) if n == 1 and 0 < m < FULL else (n, FULL)


def place(seq, ndev, rule, p_above):
    """Places seq (list of (n, milli)); returns (allocation at 100% arrived,
    unallocated GPUs, refused)."""
    cnt = [0] * (FULL + 1)  # devices per free milli
    cnt[FULL] = ndev
    refused = 0
    arrived = alloc = 0
    at100 = None
    for n, m in seq:
        arrived += n * m
        if at100 is None and arrived >= ndev * FULL:
            at100 = alloc / (ndev * FULL)  # before this pod, as the replay
        if m == FULL:
            if cnt[FULL] >= n:
                cnt[FULL] -= n
                alloc += n * m
            else:
                refused += 1
            continue
        if rule.startswith("fresh-first"):
            t = int(rule.split()[1])
            fit = choose(cnt, m, "best-fit", p_above)
            best = FULL if fit >= 0 and fit - m > t and cnt[FULL] else fit
        else:
            best = choose(cnt, m, rule, p_above)
        if best < 0:
            refused += 1
            continue
        cnt[best] -= 1
        cnt[best - m] += 1
        alloc += m
    if at100 is None:
        at100 = alloc / (ndev * FULL)
    return at100, sum(g * c for g, c in enumerate(cnt)) / FULL, refused


def choose(cnt, m, rule, p_above):
    """The free milli of the device a share of m takes by a costed rule
    (cnt: devices per free milli); -1 when none holds it."""
    best, best_cost = -1, None
    for g in range(m, FULL + 1):
        if not cnt[g]:
            continue
        r = g - m
        if rule == "best-fit":
            cost = g
        elif rule == "worst-fit":
            cost = -g
        elif rule == "expected-waste":
            cost = r * p_above[r] - (g * p_above[g] if g < FULL else 0)
        else:  # sum-of-squares: devices wholly used or wholly free do not count
            cost = (2 * cnt[r] + 1 if r > 0 else 0) - (2 * cnt[g] - 1 if g < FULL else 0)
        if best_cost is None or cost < best_cost:
            best, best_cost = g, cost
        if rule == "best-fit":
            break
    return best


def replay_parser(doc):
    """The flags of a tool over one replay: --agentsched, --nodes, --pods,
    --seed; doc's first line describes it."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--agentsched", default=None)
    ap.add_argument("--nodes", required=True)
    ap.add_argument("--pods", required=True)
    ap.add_argument("--seed", type=int, default=42)
    return ap


def main():
    a = replay_parser(__doc__).parse_args()
    binary = find_binary(a.agentsched, "share_floor")
    with open(a.nodes) as f:
        ndev = sum(int(r["gpu"]) for r in csv.DictReader(f))
    with open(a.pods) as f:
        shapes = {r["name"]: demand_of(r) for r in csv.DictReader(f)}
    order = replay(binary, a.nodes, a.pods, a.seed,
                   ["--policy", "least-allocated", "--placements", "-"])
    seq = [shapes[r["pod"]] for r in order if shapes.get(r["pod"])]
    base = replay(binary, a.nodes, a.pods, a.seed,
                  ["--policy", "least-allocated,most-allocated,best-fit,fgd", "--format", "csv"])
    classic = {r["policy"]: float(r["unallocated_gpus_end"]) for r in base
               if r["policy"] != "fgd"}
    fgd100 = [float(r["gpu_alloc_ratio_at_100"]) for r in base if r["policy"] == "fgd"][0]
    goal = 0.8 * min(classic.values())
    shares = Counter(m for n, m in seq if m < FULL)
    tot = sum(shares.values()) or 1
    p_above = [sum(c for d, c in shares.items() if d > f) / tot for f in range(FULL + 1)]
    print("pods: %s; %d devices; %d GPU pods arrive, %d of them shares"
          % (os.path.basename(a.pods), ndev, len(seq), sum(shares.values())))
    print("baselines in the full replay, unallocated GPUs: %s; goal (0.8 x best) %.1f;"
          " fgd's GPU allocation at 100%% arrived %.4f"
          % (", ".join("%s %.1f" % kv for kv in sorted(classic.items())), goal, fgd100))
    print("%-16s %8s %12s %8s %s" % ("device rule", "@100%", "unallocated", "refused", "vs goals"))
    for rule in ("best-fit", "expected-waste", "sum-of-squares", "worst-fit", "fresh-first 0",
                 "fresh-first 60"):
        at100, un, ref = place(seq, ndev, rule, p_above)
        print("%-16s %8.4f %12.1f %8d %s, %s fgd @100%%"
              % (rule, at100, un, ref, "below" if un <= goal else "above",
                 "at least" if at100 >= fgd100 else "below"))


if __name__ == "__main__":
    main()
