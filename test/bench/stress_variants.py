#!/usr/bin/env python3
"""stress_variants.py - pod-mix variants of the openb traces for bench_replay.

Builds, from one shared openb pod list (default: openb_pod_list_default.csv),
pod lists of the same cluster that differ in the pod mix, deterministically
(one seeded generator per variant), into OUT (default build/variants; never
into the shared data folder):

  share80, share100  GPU-sharing pods (one device, gpu_milli < 1000) are 80% /
                     100% of the GPU pods: GPU pods drawn at random take the
                     shape (cpu, memory, milli) of a random sharing pod
  pin33              a third of the GPU pods require a GPU model (gpu_spec),
                     drawn with the cluster's GPU count per model as weight
  pinu20, pinu33     the same, the model drawn uniformly: the rare models are
                     asked for beyond their devices (pinu33: a third pinned)
  cpu0, cpu100,      CPU-only pods are 0%, 100%, 250% of the GPU pods: CPU-only
  cpu250             pods removed, or copies of random CPU-only pods added at
                     random existing creation times
  multi20, multi50   multi-GPU pods (2+ devices) carry 20% / 50% of the GPU
                     demand (as in openb's multigpu20, whose name counts
                     demand): single-GPU pods drawn at random take the shape
                     of a random multi-GPU pod

Any percentage works the same way (share65, pin15, cpu150, multi35), and
several joined with "+" are applied in turn (share70+cpu0: the mix changes
in two ways at once). `--only mixes` builds MIXES, sixteen such
combinations that no single variant covers (the last six were added as a
later check on mixes the policy had not been tried on).

A shape change keeps the pod's name and times. Rows keep the shared file's
columns. Prints the path of every file written.

Usage: stress_variants.py [--data DIR] [--base NAME] [--out DIR] [--seed S]
                          [--only VARIANT,...]
"""
import argparse
import csv
import os
import random
import sys

VARIANTS = ["share80", "share100", "pin33", "cpu0", "cpu100", "cpu250", "multi20", "multi50"]
MIXES = ["share60+multi30", "share70+cpu150", "pin20+cpu60", "share50+pin33", "share70+multi20",
         "multi40+cpu200", "share65+multi25+cpu30", "pin15+multi35", "cpu0+share70",
         "pin33+share60+cpu120", "pin33+multi50+cpu100", "multi50+cpu250", "pinu33+share80",
         "share40+pinu40+multi20", "multi50+cpu100", "pin50+multi30+cpu60"]
KINDS = ("share", "multi", "pinu", "pin", "cpu")


def known(name):
    """True when every "+"-joined part is a kind followed by a percentage."""
    for part in name.split("+"):
        kind = next((k for k in KINDS if part.startswith(k)), None)
        if not kind or not part[len(kind):].isdigit():
            return False
    return True


def is_gpu(r):
    return int(r["num_gpu"]) > 0


def is_share(r):
    return int(r["num_gpu"]) == 1 and int(r["gpu_milli"]) < 1000


def is_multi(r):
    return int(r["num_gpu"]) > 1


SHAPE = ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


def reshape(rows, rng, frac, has, donors):
    """Gives GPU pods without the property `has` the shape of a random donor
    until `frac` of the GPU pods have it."""
    gpu = [i for i, r in enumerate(rows) if is_gpu(r)]
    target = round(frac * len(gpu))
    now = sum(1 for i in gpu if has(rows[i]))
    cand = [i for i in gpu if not has(rows[i])]
    rng.shuffle(cand)
    for i in cand[: max(0, target - now)]:
        d = rng.choice(donors)
        for k in SHAPE:
            rows[i][k] = d[k]
    return rows


def demand(r):
    """GPU demand of a pod in milli-GPU."""
    n = int(r["num_gpu"])
    return n * int(r["gpu_milli"]) if n == 1 else n * 1000


def reshape_demand(rows, rng, frac, donors):
    """Gives single-GPU pods drawn at random the shape of a random multi-GPU
    donor until multi-GPU pods carry `frac` of the GPU demand (the openb
    multigpu20 trace's measure)."""
    gpu = [i for i, r in enumerate(rows) if is_gpu(r)]
    total = sum(demand(rows[i]) for i in gpu)
    multi = sum(demand(rows[i]) for i in gpu if is_multi(rows[i]))
    cand = [i for i in gpu if not is_multi(rows[i])]
    rng.shuffle(cand)
    for i in cand:
        if multi >= frac * total:
            break
        d = rng.choice(donors)
        total += demand(d) - demand(rows[i])
        multi += demand(d)
        for k in SHAPE:
            rows[i][k] = d[k]
    return rows


def build(name, rows, nodes, rng):
    if "+" in name:
        for part in name.split("+"):
            rows = build(part, rows, nodes, rng)
        return rows
    rows = [dict(r) for r in rows]
    if name.startswith("share"):
        donors = [r for r in rows if is_share(r)]
        return reshape(rows, rng, int(name[5:]) / 100, is_share, donors)
    if name.startswith("multi"):
        donors = [r for r in rows if is_multi(r)]
        return reshape_demand(rows, rng, int(name[5:]) / 100, donors)
    if name.startswith("pin"):
        models = {}
        for n in nodes:
            if n["model"]:
                models[n["model"]] = models.get(n["model"], 0) + int(n["gpu"])
        names = sorted(models)
        uniform = name.startswith("pinu")
        weights = [1 if uniform else models[m] for m in names]
        gpu = [i for i, r in enumerate(rows) if is_gpu(r)]
        pinned = sum(1 for i in gpu if rows[i].get("gpu_spec"))
        cand = [i for i in gpu if not rows[i].get("gpu_spec")]
        rng.shuffle(cand)
        pct = int(name[4:] if uniform else name[3:])
        frac = 1 / 3 if pct == 33 else pct / 100  # pin33, pinu33: a third
        for i in cand[: max(0, round(len(gpu) * frac) - pinned)]:
            rows[i]["gpu_spec"] = rng.choices(names, weights)[0]
        return rows
    if name.startswith("cpu"):
        frac = int(name[3:]) / 100
        ngpu = sum(1 for r in rows if is_gpu(r))
        cpu = [r for r in rows if not is_gpu(r)]
        target = round(frac * ngpu)
        if target <= len(cpu):
            keep = set(id(r) for r in rng.sample(cpu, target))
            return [r for r in rows if is_gpu(r) or id(r) in keep]
        times = [r["creation_time"] for r in rows] if "creation_time" in rows[0] else None
        out = list(rows)
        for k in range(target - len(cpu)):
            r = dict(rng.choice(cpu))
            r["name"] = "%s-x%05d" % (r["name"], k)
            if times:
                r["creation_time"] = rng.choice(times)
            out.append(r)
        return out
    raise ValueError(name)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("AGENTSCHED_OPENB_DIR")
                    or os.path.join(repo, "..", "shared", "data", "openb"))
    ap.add_argument("--base", default="default")
    ap.add_argument("--out", default=os.path.join(repo, "build", "variants"))
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--only", default=",".join(VARIANTS))
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    if os.path.abspath(a.data) == out or out.startswith(os.path.abspath(a.data) + os.sep):
        sys.exit("stress_variants: refusing to write into the data folder")
    with open(os.path.join(a.data, "openb_pod_list_%s.csv" % a.base), newline="") as f:
        rd = csv.DictReader(f)
        cols = rd.fieldnames
        rows = list(rd)
    with open(os.path.join(a.data, "openb_node_list_all_node.csv"), newline="") as f:
        nodes = list(csv.DictReader(f))
    # "nan" is how the trace's README writes an absent model or gpu_spec,
    # as agentsched replay reads it
    for r in rows:
        if r.get("gpu_spec", "").lower() == "nan":
            r["gpu_spec"] = ""
    for n in nodes:
        if n.get("model", "").lower() == "nan":
            n["model"] = ""
    if "gpu_spec" not in cols:
        cols = cols + ["gpu_spec"]
    os.makedirs(out, exist_ok=True)
    names = []
    for v in a.only.split(","):
        names += MIXES if v == "mixes" else [v] if v else []
    for name in names:
        if not known(name):
            sys.exit("stress_variants: unknown variant %s (known: %s, any percentage, "
                     "several joined with +, or mixes)" % (name, " ".join(VARIANTS)))
        rng = random.Random("%d/%s/%s" % (a.seed, a.base, name))
        rows2 = build(name, rows, nodes, rng)
        path = os.path.join(out, "%s-%s.csv" % (a.base, name))
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
            w.writeheader()
            for r in rows2:
                w.writerow({k: r.get(k, "") for k in cols})
        print(path)


if __name__ == "__main__":
    main()
