#!/usr/bin/env python3
"""offline_bound.py - how much GPU any scheduler could place, knowing the future.

Takes the pods `agentsched replay` offers for a pod list (its --placements
output: the trace in order, then pods sampled until the arrived GPU demand
is 1.3 x capacity) and solves a linear program for the most GPU (milli)
that any placement of them could allocate: a clairvoyant, offline
scheduler that may refuse any pod and sees all of them at once. It is an
upper bound on what an online scheduler reaches, so the unallocated GPUs
it leaves are a floor under every policy's, and the distance between a
policy and the floor is what better placement could still win. The
programs give CPU-only pods at least as much CPU as the policy did (by the
100% point and in all): turning them away would free CPU for GPU pods,
and a floor that does so is not one the policy could be held to.

The program relaxes the replay, so its figures can only be better than
any real placement's:
  - nodes of one kind (CPU, memory, GPU count and model) pool their CPU,
    memory and devices; a pod needs only to fit one such node;
  - each device takes one of the maximal multisets of the list's share
    sizes that sum to at most 1000 milli (or a whole-GPU pod), and
    counts of devices and pods are fractional;
  - pods pinned to GPU models go only to nodes of those models.

Three programs, beside the replay's own figures for the same pods:
  ceiling @100%   the most GPU allocated from the pods that arrived before
                  the demand reached the capacity (the replay's 100% point)
  floor at end    the fewest GPUs left unallocated with every pod offered
  floor, fgd@100  the same, while the pods placed by the 100% point hold at
                  least fgd's GPU allocation there (a placement that
                  meets both goals must also meet this one; pods are never
                  moved, so the 100% placement is part of the end's)

Needs python3-scipy (Debian's, 1.10 or later: linprog's HiGHS method).

Usage: offline_bound.py [--agentsched BIN] --nodes NODES.csv --pods PODS.csv
                        [--seed S] [--policy P]
"""
import csv
import os
import sys
from collections import Counter, defaultdict

from share_floor import FULL, demand_of, find_binary, replay, replay_parser

try:
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix
except ImportError:
    sys.exit("offline_bound: needs numpy and scipy (apt install python3-scipy)")


def share_configs(sizes):
    """The multisets of sizes (dicts size -> count) summing to at most FULL
    that no further size fits in."""
    sizes = sorted(sizes)
    out = []

    def walk(i, room, cur):
        if i == len(sizes):
            if not sizes or room < sizes[0]:
                out.append(dict(cur))
            return
        s, k = sizes[i], 0
        while k * s <= room:
            if k:
                cur[s] = k
            walk(i + 1, room - k * s, cur)
            k += 1
        cur.pop(s, None)

    walk(0, FULL, {})
    return out


class Program:
    """A linear program in rows of (lower, upper, {column: coefficient})."""

    def __init__(self):
        self.cost = []
        self.rows = []

    def column(self, gain):
        self.cost.append(-gain)  # linprog minimizes
        return len(self.cost) - 1

    def row(self, coeffs, upper=None, lower=None):
        if coeffs:
            self.rows.append((lower, upper, coeffs))

    def solve(self):
        r, c, v, b = [], [], [], []
        for lower, upper, coeffs in self.rows:
            for bound, sign in ((upper, 1), (lower, -1)):
                if bound is None:
                    continue
                for col, val in coeffs.items():
                    r.append(len(b))
                    c.append(col)
                    v.append(sign * val)
                b.append(sign * bound)
        a = coo_matrix((v, (r, c)), shape=(len(b), len(self.cost))).tocsr()
        res = linprog(np.array(self.cost), A_ub=a, b_ub=np.array(b), bounds=(0, None),
                      method="highs")
        if res.status != 0:
            sys.exit("offline_bound: the program did not solve: %s" % res.message)
        return -res.fun


def most_gpu(kinds, pods, configs, cpu_pods, min_early=None):
    """The most GPU (milli) the program places from pods (Counter of
    (count, milli, cpu, memory, models, early)) on kinds (Counter of
    (cpu, memory, gpus, model)), giving CPU-only pods at least cpu_pods CPU;
    min_early: milli the early pods must hold."""
    lp = Program()
    take = defaultdict(dict)  # pod class -> {column: 1}
    early, cpu_only = {}, {}
    for (cpu, mem, gpus, model), nodes in kinds.items():
        devices, per_size, cpu_row, mem_row = {}, defaultdict(dict), {}, {}
        for cfg in configs if gpus else ():
            col = lp.column(0)
            devices[col] = 1
            for s, k in cfg.items():
                per_size[s][col] = -k
        for key in pods:
            n, m, pcpu, pmem, models, first = key
            if pcpu > cpu or pmem > mem or n > gpus or (models and model not in models):
                continue
            col = lp.column(n * m)
            take[key][col] = 1
            if first and n:
                early[col] = n * m
            if not n:
                cpu_only[col] = pcpu
            cpu_row[col] = pcpu
            mem_row[col] = pmem
            if n == 1 and m < FULL:
                per_size[m][col] = 1
            elif n:
                devices[col] = n
        lp.row(devices, upper=gpus * nodes)
        for coeffs in per_size.values():
            lp.row(coeffs, upper=0)
        lp.row(cpu_row, upper=cpu * nodes)
        lp.row(mem_row, upper=mem * nodes)
    for key, cols in take.items():
        lp.row(cols, upper=pods[key])
    lp.row(cpu_only, lower=cpu_pods)
    if min_early is not None:
        lp.row(early, lower=min_early)
    return lp.solve()


def main():
    ap = replay_parser(__doc__)
    ap.add_argument("--policy", default="fragment")
    a = ap.parse_args()
    binary = find_binary(a.agentsched, "offline_bound")
    with open(a.nodes) as f:
        kinds = Counter((int(r["cpu_milli"]), int(r["memory_mib"]), int(r["gpu"]),
                         r["model"] if int(r["gpu"]) else "") for r in csv.DictReader(f))
    cap = sum(g * n for (_, _, g, _), n in kinds.items()) * FULL
    with open(a.pods) as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    order = replay(binary, a.nodes, a.pods, a.seed, ["--policy", a.policy, "--placements", "-"])
    pods = Counter()
    cpu_pods = [0, 0]  # CPU the policy's CPU-only pods got: by the 100% point, in all
    arrived = 0
    for r in order:
        row = rows.get(r["pod"])
        if row is None:  # the summary table after the placements
            continue
        n, m = demand_of(row) or (0, 0)
        arrived += n * m
        spec = row.get("gpu_spec", "")
        models = frozenset(x for x in ("" if spec.lower() == "nan" else spec).split("|") if x)
        # the replay reads its 100% point before the pod that reaches it
        early = arrived < cap
        pods[(n, m, int(row["cpu_milli"]), int(row["memory_mib"]), models, early)] += 1
        if not n and r["node"]:
            cpu_pods[0] += early * int(row["cpu_milli"])
            cpu_pods[1] += int(row["cpu_milli"])
    configs = share_configs({m for n, m, *_ in pods if n == 1 and m < FULL})
    base = replay(binary, a.nodes, a.pods, a.seed,
                  ["--policy", "least-allocated,most-allocated,best-fit,fgd," + a.policy,
                   "--format", "csv"])
    got = {r["policy"]: r for r in base}
    classic = min(float(got[p]["unallocated_gpus_end"])
                  for p in ("least-allocated", "most-allocated", "best-fit"))
    fgd100 = float(got["fgd"]["gpu_alloc_ratio_at_100"])
    mine = base[-1]  # the policy's row: the replay keeps the order asked
    early_pods = Counter({k: c for k, c in pods.items() if k[5]})
    ceiling = most_gpu(kinds, early_pods, configs, cpu_pods[0]) / cap
    floor = max(0.0, cap - most_gpu(kinds, pods, configs, cpu_pods[1])) / FULL
    floor_fgd = max(0.0, cap - most_gpu(kinds, pods, configs, cpu_pods[1], fgd100 * cap)) / FULL
    print("pods: %s; %d GPUs; %d pods offered, %d device configurations; %s gave CPU-only"
          " pods %.0f cores by the 100%% point, %.0f in all (the programs give as many)"
          % (os.path.basename(a.pods), cap // FULL, sum(pods.values()), len(configs), a.policy,
             cpu_pods[0] / 1000, cpu_pods[1] / 1000))
    print("goal: at most %.1f unallocated (0.8 x the best classic's %.1f); at least fgd's"
          " %.4f at 100%%" % (0.8 * classic, classic, fgd100))
    print("%-22s %8s %12s" % ("", "@100%", "unallocated"))
    print("%-22s %8.4f %12.1f" % (a.policy, float(mine["gpu_alloc_ratio_at_100"]),
                                  float(mine["unallocated_gpus_end"])))
    print("%-22s %8.4f %12s" % ("offline ceiling @100%", ceiling, "-"))
    print("%-22s %8s %12.1f" % ("offline floor at end", "-", floor))
    print("%-22s %8.4f %12.1f" % ("offline floor, fgd@100", fgd100, floor_fgd))


if __name__ == "__main__":
    main()
