#!/usr/bin/env python3
"""An independent exact lexicographic solver of `jointplan solve` problems on OR-Tools CP-SAT,
used as an oracle (does jointplan's answer have the optimal value on every level?) and as a
speed anchor (how long does CP-SAT take on the same instance?).

Not part of the test suite: it needs OR-Tools and a release build, and the table takes minutes.

How to run (from the repository root):

    python3 -m venv /tmp/cpsat-venv && /tmp/cpsat-venv/bin/pip install ortools
    cargo build --release --locked
    # one problem file, every objective: CP-SAT against `jointplan solve`, agreement checked
    /tmp/cpsat-venv/bin/python benches/cpsat/compare.py one PROBLEM.json
    # the oracle on many small generated instances (every family, objective, share)
    /tmp/cpsat-venv/bin/python benches/cpsat/compare.py check
    # the timing table of docs/performance.md ("Against CP-SAT")
    /tmp/cpsat-venv/bin/python benches/cpsat/compare.py table --sizes 1000,3000 --limit 20

Exit status: 0 when every compared pair agrees, 1 on any disagreement (printed loudly, with
the first level that differs), 2 on bad usage.

The model (its own formulation, sharing no code with jointplan):

* `x[n][c]`, one Boolean per node and usable candidate, exactly one per node (a candidate
  with an empty accepted list for some resource is unusable and dropped, as the problem
  format says);
* `used[r]` is true exactly when a chosen candidate touches `r` (implications both ways);
* `y[r][k]`, the rank given to `r`: exactly one when `r` is used, none otherwise, and
  `y[r][k]` excludes every candidate touching `r` that does not accept rank `k` (one clause
  per such pair: the conflict form);
* the preferred flag of a node is its preferred candidate's `x` (0 when the preferred
  provider has no usable candidate); rank `k`'s count is `sum_r y[r][k]`; a node's provider
  digit is the index of its chosen candidate among its candidates sorted by provider id
  (byte order).

For a fixed choice of `x`, giving every used resource the lowest rank of its intersection is
feasible and at least as good on every level (the rank counts are compared worst rank first,
and the weighted score has non-decreasing rank weights), so the lexicographic optimum of the
model has the problem's optimal level values; the values reported below are recomputed from
the chosen candidates alone, never read from `y`.

The levels, as `src/selection/objective.rs` defines them (solved one after the other, each
level's optimum fixed before the next):

* `seed-lex`: preferred flags in node order (lexicographic, more wins at the first
  difference), rank counts from rank P-1 down to rank 1 (fewer wins), provider ids in node
  order;
* `max-preferred`: number of preferences met, the rank counts, provider ids;
* `min-penalty`: the rank counts, preferred flags in node order, provider ids;
* `weighted`: `sum_k ranks[k] * count_k - preferred * met` (smaller wins), then the seed-lex
  levels (weights `{"preferred": 3, "ranks": [0, 2, 4, 6]}` for four profiles unless
  `--weights` is given).

The node-order levels are solved in chunks: a chunk of positions becomes one objective with
digit weights (`2^(K-1-j)` for preferred flags, `B^(K-1-j)` for provider digits of base
`B`, the largest number of candidates in the chunk) whose total stays below 2^40, and the
chunk's values are fixed after its solve. A position the incumbent already settles at its
best possible value (its preference met, or its first candidate) is fixed without a solve:
the incumbent satisfies every fixing of the earlier positions. To make that frequent, a
short solve for a good start (most preferences met, before the first level; the smallest sum
of provider digits, before the provider-id level) runs first, capped at a second or a tenth
of the time left; its optimality is never used. Every solve gets the previous solution as a hint
and the time left of the instance's limit; CP-SAT runs in-process with `--workers` search
workers (2 by default, the machine's cores) and its time includes building the model.
jointplan runs as a whole process (`jointplan solve FILE --objective O --time-limit L`), so
its time includes start-up and reading the file.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    from ortools.sat.python import cp_model
except ImportError:  # pragma: no cover - a usage error, said plainly
    sys.stderr.write(
        "compare.py: OR-Tools is not installed; run it with a Python that has it:\n"
        "  python3 -m venv /tmp/cpsat-venv && /tmp/cpsat-venv/bin/pip install ortools\n"
        "  /tmp/cpsat-venv/bin/python benches/cpsat/compare.py ...\n"
    )
    sys.exit(2)

OBJECTIVES = ["seed-lex", "max-preferred", "min-penalty", "weighted"]
# Digit weights of one chunk solve of a node-order level stay below 2^CHUNK_BITS.
CHUNK_BITS = 40


# --------------------------------------------------------------------------- the problem


class Problem:
    """A problem file with unusable candidates dropped and candidates in provider order."""

    def __init__(self, data):
        self.profiles = list(data["profiles"])
        rank = {p: k for k, p in enumerate(self.profiles)}
        self.nodes = []  # (id, preferred index or None, [(provider, {resource: mask})])
        for node in data["nodes"]:
            cands = []
            for c in node["candidates"]:
                accepts = {}
                usable = True
                for r, allowed in c["accepts"].items():
                    mask = 0
                    for p in allowed:
                        mask |= 1 << rank[p]
                    if mask == 0:
                        usable = False
                    accepts[r] = mask
                if usable:
                    cands.append((c["provider"], accepts))
            if not cands:
                raise SystemExit(f"compare.py: node {node['id']} has no usable candidate")
            cands.sort(key=lambda c: c[0].encode("utf-8"))
            pref = node.get("preferred")
            pi = next((i for i, c in enumerate(cands) if c[0] == pref), None)
            self.nodes.append((node["id"], pi, cands))


def default_weights(profiles):
    return {"preferred": 3, "ranks": [2 * k for k in range(profiles)]}


def levels_of(objective, profiles):
    penalty = [("rank", k) for k in range(profiles - 1, 0, -1)]
    if objective == "seed-lex":
        return [("pref-lex",)] + penalty + [("ids",)]
    if objective == "max-preferred":
        return [("pref-count",)] + penalty + [("ids",)]
    if objective == "min-penalty":
        return penalty + [("pref-lex",), ("ids",)]
    if objective == "weighted":
        return [("weighted",), ("pref-lex",)] + penalty + [("ids",)]
    raise SystemExit(f"compare.py: unknown objective {objective}")


def evaluate(problem, choice):
    """Level values of `choice` (one candidate index per node), recomputed from scratch, or
    the reason it is not a solution."""
    masks = {}
    for (_, _, cands), c in zip(problem.nodes, choice):
        for r, m in cands[c][1].items():
            masks[r] = masks.get(r, (1 << 64) - 1) & m
    counts = [0] * len(problem.profiles)
    profiles = {}
    for r, m in masks.items():
        if m == 0:
            return None, f"resource {r} has no common profile"
        k = (m & -m).bit_length() - 1
        counts[k] += 1
        profiles[r] = problem.profiles[k]
    flags = [pi is not None and pi == c for (_, pi, _), c in zip(problem.nodes, choice)]
    return {
        "flags": flags,
        "met": sum(flags),
        "counts": counts,
        "ids": [cands[c][0] for (_, _, cands), c in zip(problem.nodes, choice)],
        "profiles": profiles,
    }, None


def level_value(level, ev, weights):
    """The value of one level, comparable with ==; `pref-lex` keeps only nodes with a
    usable preferred candidate (the others are constant)."""
    kind = level[0]
    if kind == "pref-lex":
        return tuple(ev["flags"])
    if kind == "pref-count":
        return ev["met"]
    if kind == "rank":
        return ev["counts"][level[1]]
    if kind == "weighted":
        return sum(w * c for w, c in zip(weights["ranks"], ev["counts"])) - weights[
            "preferred"
        ] * ev["met"]
    if kind == "ids":
        return tuple(ev["ids"])
    raise ValueError(level)


def rank_key(levels, ev, weights):
    """A key whose `<` is the objective's "better" (every level turned into a minimum)."""
    key = []
    for level in levels:
        v = level_value(level, ev, weights)
        if level[0] == "pref-lex":
            v = tuple(not f for f in v)
        elif level[0] == "pref-count":
            v = -v
        elif level[0] == "ids":
            v = tuple(p.encode("utf-8") for p in v)
        key.append(v)
    return key


def level_name(level):
    return level[0] if len(level) == 1 else f"rank-{level[1]} count"


# --------------------------------------------------------------------------- CP-SAT


class Cpsat:
    """The model of one problem and its lexicographic solve."""

    def __init__(self, problem, workers):
        self.problem = problem
        self.workers = workers
        m = cp_model.CpModel()
        self.model = m
        self.x = []
        touchers = {}
        for i, (_, _, cands) in enumerate(problem.nodes):
            xs = [m.new_bool_var(f"x{i}_{c}") for c in range(len(cands))]
            m.add_exactly_one(xs)
            self.x.append(xs)
            for c, (_, accepts) in enumerate(cands):
                for r, mask in accepts.items():
                    touchers.setdefault(r, []).append((xs[c], mask))
        self.y = {}  # rank -> [y vars]
        for r in sorted(touchers):
            ts = touchers[r]
            used = m.new_bool_var(f"used_{r}")
            for xv, _ in ts:
                m.add_implication(xv, used)
            m.add_bool_or([xv for xv, _ in ts]).only_enforce_if(used)
            union = 0
            for _, mask in ts:
                union |= mask
            ys = []
            for k in range(len(problem.profiles)):
                if union >> k & 1:
                    yv = m.new_bool_var(f"y_{r}_{k}")
                    ys.append(yv)
                    self.y.setdefault(k, []).append(yv)
                    for xv, mask in ts:
                        if not mask >> k & 1:
                            m.add_bool_or([xv.Not(), yv.Not()])
            m.add(sum(ys) == used)
        self.pref = [
            self.x[i][pi] for i, (_, pi, _) in enumerate(problem.nodes) if pi is not None
        ]
        self.pref_pos = [i for i, (_, pi, _) in enumerate(problem.nodes) if pi is not None]
        self.choice = None
        self.solves = 0

    def _start(self, objective, sense, deadline):
        """A solve for a better starting point only (its optimality is never used): at
        most a second or a tenth of the time left, then any solution; True when it found
        one."""
        left = deadline - time.perf_counter()
        cap = time.perf_counter() + min(1.0, left / 10)
        if objective is not None and self._solve(objective, sense, cap, start=True):
            return True
        return self._solve(None, "min", deadline, start=True)

    def _solve(self, objective, sense, deadline, start=False):
        """One solve; returns True when optimal (with `start`: when a solution was found),
        False at the time limit; raises on infeasibility."""
        m = self.model
        left = deadline - time.perf_counter()
        if left <= 0:
            return False
        if objective is None:
            m.clear_objective()
        elif sense == "min":
            m.minimize(objective)
        else:
            m.maximize(objective)
        m.clear_hints()
        if self.choice is not None:
            for xs, c in zip(self.x, self.choice):
                for j, xv in enumerate(xs):
                    m.add_hint(xv, j == c)
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = left
        solver.parameters.num_workers = self.workers
        self.solves += 1
        status = solver.solve(m)
        if status == cp_model.INFEASIBLE:
            raise RuntimeError("infeasible")
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return False
        self.choice = [
            next(j for j, xv in enumerate(xs) if solver.boolean_value(xv)) for xs in self.x
        ]
        return start or status == cp_model.OPTIMAL

    def solve(self, levels, weights, limit):
        """The lexicographic optimum: ('optimal' | 'limit' | 'infeasible', choice)."""
        deadline = time.perf_counter() + limit
        m = self.model
        try:
            # A first solution; when a preference level comes, one meeting many
            # preferences, so that the node-order level settles most positions without a
            # solve (any solution is a valid start: exactness never depends on it).
            wants_preferences = any(l[0] in ("pref-lex", "pref-count") for l in levels)
            if self.pref and wants_preferences:
                found = self._start(sum(self.pref), "max", deadline)
            else:
                found = self._start(None, "min", deadline)
            if not found:
                return "limit", self.choice
            for level in levels:
                if not self._level(level, weights, deadline):
                    return "limit", self.choice
        except RuntimeError:
            return "infeasible", None
        return "optimal", self.choice

    def _level(self, level, weights, deadline):
        m = self.model
        kind = level[0]
        if kind == "pref-count":
            if not self.pref:
                return True
            if not self._solve(sum(self.pref), "max", deadline):
                return False
            m.add(sum(self.pref) >= sum(self.choice[i] == self.problem.nodes[i][1] for i in self.pref_pos))
            return True
        if kind == "rank":
            ys = self.y.get(level[1], [])
            if not ys:
                return True
            if not self._solve(sum(ys), "min", deadline):
                return False
            ev, _ = evaluate(self.problem, self.choice)
            # The model's count may exceed the true one only where it is not minimal; at
            # the optimum they agree, and the true count is the bound to keep.
            m.add(sum(ys) <= ev["counts"][level[1]])
            return True
        if kind == "weighted":
            terms = []
            for k, ys in self.y.items():
                w = weights["ranks"][k]
                if w:
                    terms.extend(w * yv for yv in ys)
            wp = weights["preferred"]
            if wp:
                terms.extend(-wp * p for p in self.pref)
            if not terms:
                return True
            expr = sum(terms)
            if not self._solve(expr, "min", deadline):
                return False
            ev, _ = evaluate(self.problem, self.choice)
            m.add(expr <= level_value(level, ev, weights))
            return True
        if kind == "pref-lex":
            return self._preferred_chunks(deadline)
        if kind == "ids":
            # A start with small provider digits under every fixing so far, so that most
            # positions are settled at their first candidate without a solve.
            digits = [sum(c * xv for c, xv in enumerate(xs)) for xs in self.x if len(xs) > 1]
            if digits and not self._start(sum(digits), "min", deadline):
                return False
            positions = [i for i, xs in enumerate(self.x) if len(xs) > 1]
            return self._id_chunks(positions, deadline)
        raise ValueError(level)

    def _id_chunks(self, positions, deadline):
        """The provider-id level in node order, chunk by chunk (see the header)."""
        m = self.model
        at = 0
        while at < len(positions):
            i = positions[at]
            if self.choice[i] == 0:
                # The incumbent, which satisfies every fixing of the earlier positions,
                # has the first candidate here: the best value this position can have.
                m.add(self.x[i][0] == 1)
                at += 1
                continue
            chunk, base = [], 1
            for j in positions[at:]:
                b = max(base, len(self.x[j]))
                if chunk and b ** (len(chunk) + 1) >= 1 << CHUNK_BITS:
                    break
                base = b
                chunk.append(j)
            k = len(chunk)
            digits = [sum(c * xv for c, xv in enumerate(self.x[j])) for j in chunk]
            if not self._solve(sum(base ** (k - 1 - d) * v for d, v in enumerate(digits)),
                               "min", deadline):
                return False
            for j in chunk:
                m.add(self.x[j][self.choice[j]] == 1)
            at += k
        return True

    def _preferred_chunks(self, deadline):
        """The preferred level in node order, chunk by chunk (see the header)."""
        m = self.model
        nodes = self.problem.nodes
        at = 0
        while at < len(self.pref_pos):
            i = self.pref_pos[at]
            if self.choice[i] == nodes[i][1]:
                # Met by the incumbent, which satisfies every fixing of the earlier
                # positions: the best value this position can have.
                m.add(self.x[i][nodes[i][1]] == 1)
                at += 1
                continue
            chunk = self.pref_pos[at:at + CHUNK_BITS]
            k = len(chunk)
            flags = [self.x[j][nodes[j][1]] for j in chunk]
            if not self._solve(sum((1 << (k - 1 - d)) * f for d, f in enumerate(flags)),
                               "max", deadline):
                return False
            for j, f in zip(chunk, flags):
                m.add(f == int(self.choice[j] == nodes[j][1]))
            at += k
        return True


def cpsat_solve(problem, objective, weights, limit, workers):
    t = time.perf_counter()
    model = Cpsat(problem, workers)
    status, choice = model.solve(levels_of(objective, len(problem.profiles)), weights, limit)
    return status, choice, time.perf_counter() - t, model.solves


# --------------------------------------------------------------------------- jointplan


def jointplan_solve(binary, path, problem, objective, weights_path, limit):
    cmd = [binary, "solve", path, "--objective", objective, "--time-limit", str(limit)]
    if objective == "weighted":
        cmd += ["--weights", weights_path]
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if out.returncode == 1:
        return "infeasible", None, seconds, None
    if out.returncode != 0:
        raise SystemExit(
            f"compare.py: `{' '.join(cmd)}` exited {out.returncode}: {out.stderr.strip()}"
        )
    answer = json.loads(out.stdout)
    index = {}
    for i, (node_id, _, cands) in enumerate(problem.nodes):
        index[node_id] = {p: c for c, (p, _) in enumerate(cands)}
    choice = [index[node_id][answer["choices"][node_id]] for node_id, _, _ in problem.nodes]
    status = "optimal" if answer["status"] == "optimal" else "limit"
    return status, choice, seconds, answer


# --------------------------------------------------------------------------- comparison


def agreement(problem, objective, weights, jp, cs):
    """'agree', 'not compared (...)', or a DISAGREEMENT line naming the first level."""
    (js, jc, _, answer), (cst, cc, _, _) = jp, cs
    if js == "infeasible" or cst == "infeasible":
        return "agree (infeasible)" if js == cst else f"DISAGREEMENT: jointplan {js}, CP-SAT {cst}"
    jev, why = evaluate(problem, jc)
    if jev is None:
        return f"DISAGREEMENT: jointplan's answer is not a solution ({why})"
    if jev["profiles"] != answer["profiles"]:
        return "DISAGREEMENT: jointplan's profiles are not the lowest common ranks"
    if jev["counts"] != answer["summary"]["penalty_by_rank"]:
        return "DISAGREEMENT: jointplan's penalty_by_rank does not match its choices"
    cev, why = evaluate(problem, cc)
    if cev is None:
        return f"DISAGREEMENT: CP-SAT's answer is not a solution ({why})"
    if js != "optimal" or cst != "optimal":
        # One side stopped at its limit: its answer must not beat the other's proved optimum.
        levels = levels_of(objective, len(problem.profiles))
        jk, ck = rank_key(levels, jev, weights), rank_key(levels, cev, weights)
        if js == "optimal" and ck < jk:
            return "DISAGREEMENT: CP-SAT's limited answer beats jointplan's optimum"
        if cst == "optimal" and jk < ck:
            return "DISAGREEMENT: jointplan's limited answer beats CP-SAT's optimum"
        return f"not compared (jointplan {js}, CP-SAT {cst}; neither beats a proved optimum)"
    for level in levels_of(objective, len(problem.profiles)):
        a, b = level_value(level, jev, weights), level_value(level, cev, weights)
        if a != b:
            return f"DISAGREEMENT at {level_name(level)}: jointplan {short(a)}, CP-SAT {short(b)}"
    return "agree"


def short(v):
    text = repr(v)
    return text if len(text) < 80 else text[:77] + "..."


def run_pair(args, path, objective, weights, weights_path):
    with open(path) as f:
        problem = Problem(json.load(f))
    jp = jointplan_solve(args.jointplan, path, problem, objective, weights_path, args.limit)
    cs = cpsat_solve(problem, objective, weights, args.limit, args.workers)
    return problem, jp, cs, agreement(problem, objective, weights, jp, cs)


def generate(binary, spec, path):
    out = subprocess.run([binary, "solve", "--generate", spec, path], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"compare.py: --generate {spec}: {out.stderr.strip()}")


def cell(status, seconds):
    return f"{seconds:.2f} s" + ("" if status == "optimal" else f" ({status})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["one", "check", "table"])
    ap.add_argument("problem", nargs="?", help="the problem file (mode `one`)")
    ap.add_argument("--jointplan", default="target/release/jointplan")
    ap.add_argument("--limit", type=float,
                    help="seconds per solve, each side (default: 5 in `check`, 20 otherwise)")
    ap.add_argument("--workers", type=int, default=2, help="CP-SAT search workers")
    ap.add_argument("--sizes", default="1000,3000")
    ap.add_argument("--shares", default="0,50,100", help="percent of nodes with a preference")
    ap.add_argument("--objectives", default=",".join(OBJECTIVES))
    ap.add_argument("--weights", help="weights file for `weighted` (default: 3, [0,2,4,..])")
    args = ap.parse_args()
    if not os.path.exists(args.jointplan):
        raise SystemExit(f"compare.py: no {args.jointplan}; run `cargo build --release --locked`")
    if args.limit is None:
        args.limit = 5.0 if args.mode == "check" else 20.0
    objectives = args.objectives.split(",")
    tmp = tempfile.mkdtemp(prefix="jointplan-cpsat-")

    def weights_for(profiles):
        """The weights for instances of `profiles` profiles: the --weights file, its `ranks`
        cut to the first `profiles` entries when it has more (still non-decreasing)."""
        if args.weights:
            with open(args.weights) as f:
                w = json.load(f)
            if len(w["ranks"]) == profiles:
                return w, args.weights
            if len(w["ranks"]) < profiles:
                raise SystemExit(f"compare.py: {args.weights} has {len(w['ranks'])} ranks, "
                                 f"an instance has {profiles} profiles")
            w = {**w, "ranks": w["ranks"][:profiles]}
        else:
            w = default_weights(profiles)
        path = os.path.join(tmp, f"weights-{profiles}.json")
        with open(path, "w") as f:
            json.dump(w, f)
        return w, path

    bad = 0
    if args.mode == "one":
        if not args.problem:
            ap.error("mode `one` needs a problem file")
        with open(args.problem) as f:
            profiles = len(json.load(f)["profiles"])
        w, wp = weights_for(profiles)
        for objective in objectives:
            _, jp, cs, verdict = run_pair(args, args.problem, objective, w, wp)
            bad += verdict.startswith("DISAGREEMENT")
            print(f"{objective}: jointplan {cell(jp[0], jp[2])}, CP-SAT {cell(cs[0], cs[2])} "
                  f"({cs[3]} solves): {verdict}")
    elif args.mode == "check":
        # Small instances of every family: both sides finish, so every pair is compared.
        specs = [f"{kind}:{n}:{seed}:{p}:{share}"
                 for kind, n in [("long-range", 40), ("long-range", 100), ("chain", 150),
                                 ("residual", 120)]
                 for seed in (1, 2) for p in (3, 4) for share in (0, 50, 100)]
        compared = 0
        for spec in specs:
            path = os.path.join(tmp, spec.replace(":", "_") + ".json")
            generate(args.jointplan, spec, path)
            w, wp = weights_for(int(spec.split(":")[3]))
            for objective in objectives:
                _, jp, cs, verdict = run_pair(args, path, objective, w, wp)
                compared += verdict.startswith("agree")
                if not verdict.startswith("agree"):
                    bad += verdict.startswith("DISAGREEMENT")
                    print(f"{spec} {objective}: {verdict}")
        print(f"{compared} pairs agree, {bad} disagree, "
              f"{len(specs) * len(objectives) - compared - bad} not compared")
    else:
        print("| nodes | preferred | objective | jointplan | CP-SAT | CP-SAT / jointplan | answers |")
        print("| ---: | ---: | --- | ---: | ---: | ---: | --- |")
        for n in [int(s) for s in args.sizes.split(",")]:
            for share in [int(s) for s in args.shares.split(",")]:
                spec = f"long-range:{n}:1:4:{share}"
                path = os.path.join(tmp, spec.replace(":", "_") + ".json")
                generate(args.jointplan, spec, path)
                w, wp = weights_for(4)
                for objective in objectives:
                    _, jp, cs, verdict = run_pair(args, path, objective, w, wp)
                    bad += verdict.startswith("DISAGREEMENT")
                    ratio = cs[2] / jp[2]
                    bound = "" if cs[0] == "optimal" else "≥ "
                    if jp[0] != "optimal":
                        bound = "" if cs[0] != "optimal" else "≤ "
                    if jp[0] != "optimal" and cs[0] != "optimal":
                        bound = "? "
                    print(f"| {n} | {share}% | {objective} | {cell(jp[0], jp[2])} | "
                          f"{cell(cs[0], cs[2])} | {bound}{ratio:.2f}x | {verdict} |", flush=True)
    if bad:
        print(f"compare.py: {bad} DISAGREEMENT(S) between jointplan and CP-SAT", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
