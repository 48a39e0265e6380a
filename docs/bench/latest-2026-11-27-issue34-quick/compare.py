#!/usr/bin/env python3
"""Before/after of two `nerve bench all` report.json files: every check, then every row figure."""
import json, re, sys
b = json.load(open(sys.argv[1])); a = json.load(open(sys.argv[2]))
def key(c):
    t = re.split(r"<=|>=|<|>", c["target"])[0].strip()
    t = re.sub(r"\(not met.*", "", t).strip()
    return (c["suite"], t, re.sub(r", median of .*|, range .*", "", c.get("scope") or ""))
def fmt(v):
    if v is None: return "–"
    return f"{v:.4g}"
bc = {}
for c in b["checks"]: bc.setdefault(key(c), c)
out = ["| suite | target (after) | where | before | after | met before → after |", "|---|---|---|---|---|---|"]
seen = set()
for c in a["checks"]:
    k = key(c); o = bc.get(k); seen.add(k)
    mb = "–" if o is None else ("yes" if o["met"] else "no")
    ma = "yes" if c["met"] else "no"
    out.append(f"| {c['suite']} | {c['target']} | {c.get('scope','')} | {fmt(o['value']) if o else 'new'} | {fmt(c['value'])} | {mb} → {ma} |")
for k, o in bc.items():
    if k not in seen:
        out.append(f"| {o['suite']} | {o['target']} | {o.get('scope','')} | {fmt(o['value'])} | gone | {'yes' if o['met'] else 'no'} → – |")
sb = sum(c["met"] for c in b["checks"]); sa = sum(c["met"] for c in a["checks"])
print(f"checks met: before {sb} of {len(b['checks'])}, after {sa} of {len(a['checks'])}\n")
print("\n".join(out))

# rows: Nerve rows' P50-like figures, worse by more than 1.3x (lower is better) or 0.77x (higher)
ID = ("suite","system","mode","payload_bytes","size_bytes","rate_hz","route","topology","message","measure","kind","point","timeout_ms","scenario","name","consumer","mib","label","path","case")
IDN = re.compile(r"(bytes|_hz|_ms|mib|depth|readers|threads|producers|consumers|pingers|pongers|size|columns|beams|width|height|frames|nodes|timers|round|tensors)$")
def rid(r):
    return tuple(sorted((k, json.dumps(v)) for k, v in r.items()
                 if isinstance(v, str) or isinstance(v, bool) or (isinstance(v, int) and IDN.search(k))))
def flat(d, p=""):
    o = {}
    for k, v in d.items():
        if isinstance(v, dict): o.update(flat(v, p + k + "."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool): o[p + k] = v
    return o
LOWER = re.compile(r"(p50|median|avg|mean)")
HIGHER = re.compile(r"(tps|msg_per_s|m_msg|throughput|per_s)")
br = {rid(r): r for r in b["results"]}
worse = []
for r in a["results"]:
    if "nerve" not in json.dumps(r.get("system", "")) + json.dumps(r.get("label", "")) and r.get("suite") not in ("paths",):
        continue
    o = br.get(rid(r))
    if not o: continue
    fa, fb = flat(r), flat(o)
    for k, v in fa.items():
        if k not in fb or fb[k] == 0 or k.startswith("cpu") or "max" in k or "p99" in k: continue
        ratio = v / fb[k]
        if LOWER.search(k) and ratio > 1.3 and v - fb[k] > 1:
            worse.append((r["suite"], dict(rid(r)), k, fb[k], v, ratio))
        elif HIGHER.search(k) and ratio < 0.77:
            worse.append((r["suite"], dict(rid(r)), k, fb[k], v, ratio))
print(f"\nNerve rows worse by > 1.3x (P50/median/mean) or < 0.77x (throughput): {len(worse)}\n")
print("| suite | row | figure | before | after | after/before |\n|---|---|---|---|---|---|")
for s, i, k, x, y, q in worse:
    row = " ".join(json.loads(v) if isinstance(json.loads(v), str) else str(json.loads(v)) for kk, v in i.items() if kk != "suite")
    print(f"| {s} | {row} | {k} | {x:.4g} | {y:.4g} | {q:.2f} |")
