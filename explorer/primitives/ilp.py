"""Primitive selection by integer linear programming, as TASO states it (Wen, Anderson, Radu,
O'Boyle, Gregg 2020, Sec. 4), solved with HiGHS (highspy).

Variables: one binary x_ip per layer i and candidate primitive p with sum_p x_ip = 1 (the
one-hot vectors L_i). Layout transitions (Eq. 10-12): for every edge (i, j) and pair (p, q)
whose layouts differ, a binary y = floor((x_ip + x_jq) / 2), written linearly as
2y <= x_ip + x_jq and y >= x_ip + x_jq - 1, carrying Trans_(i,j)[p, q].
  Eq. 13: minimise time  = sum x_ip t_ip + sum y trans_ms  s.t. memory <= M.
  Eq. 14: minimise memory                                  s.t. time <= E.
  Eq. 15: minimise the one shared workspace W >= (workspace of step i) for every i,
          s.t. time <= E (here: buffers + weights + W, memtrade's memory with one arena).
Memory (explorer/primitives/costs.py): the plan's buffers + chosen weights + workspaces, summed
over steps (strategy "sum", Eq. 13/14) or their maximum (strategy "workspace", Eq. 15). A
time budget is one frame of every CNN, or per CNN (fps constraints).

`front` sweeps the memory budget (epsilon-constraint): each point minimises time under
memory <= the previous point's memory - 1 byte, then memory at that time; the result is the
exact Pareto front of the cost model. `greedy` is the paper's baseline (Sec. 5.3.2).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import highspy

from explorer.primitives.costs import CostModel

TIME_LIMIT_S = 10.0


@dataclass
class Solution:
    choice: tuple[int, ...] | None     # option index per layer; None when infeasible
    objective: float
    seconds: float
    status: str


@dataclass
class Point:
    choice: tuple[int, ...]
    time_ms: float
    memory_bytes: int
    ms: dict[str, float]
    seconds: float                     # solver time for this budget (both stages)


@dataclass
class Front:
    strategy: str
    points: list[Point] = field(default_factory=list)
    complete: bool = True              # False when max_points stopped the sweep
    seconds: float = 0.0


class _Model:
    """One HiGHS model of `costs`: x, y, optional W, and the time/memory expressions."""

    def __init__(self, costs: CostModel, strategy: str, time_limit: float):
        self.costs = costs
        h = self.h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("mip_rel_gap", 0.0)
        # x within 1e-6 of 0/1 (the default) times a workspace of MBs is bytes of slack:
        # enough to "meet" a budget 1 byte under the same point again; 1e-10 is too tight
        # for HiGHS (false infeasibility); both checked in tests/explorer/primitives/test_taso_ilp.py
        h.setOptionValue("mip_feasibility_tolerance", 1e-9)
        h.setOptionValue("primal_feasibility_tolerance", 1e-9)
        h.setOptionValue("time_limit", float(time_limit))
        h.setOptionValue("random_seed", 0)
        self.x = [[h.addBinary() for _ in opts] for opts in costs.options]
        for xs in self.x:
            h.addConstr(sum(xs) == 1)
        self.time = {c: 0 for c in costs.cnns}
        step_ws = [sum(o.workspace_bytes * x for o, x in zip(opts, xs))
                   for opts, xs in zip(costs.options, self.x)]
        for i, (opts, xs) in enumerate(zip(costs.options, self.x)):
            cnn = costs.layers[i][0]
            self.time[cnn] = self.time[cnn] + sum(o.ms * x for o, x in zip(opts, xs))
        for e in costs.edges:
            cnn = costs.layers[e.u][0]
            for p, a in enumerate(costs.options[e.u]):
                for q, b in enumerate(costs.options[e.v]):
                    ms, ws, at = e.cost(a, b)
                    if ms == 0 and ws == 0:
                        continue
                    y = h.addBinary()                        # floor((x_up + x_vq) / 2)
                    h.addConstr(2 * y <= self.x[e.u][p] + self.x[e.v][q])
                    h.addConstr(y >= self.x[e.u][p] + self.x[e.v][q] - 1)
                    self.time[cnn] = self.time[cnn] + ms * y
                    step_ws[at] = step_ws[at] + ws * y
        self.total_time = sum(self.time.values())
        weights = sum(o.weight_bytes * x for opts, xs in zip(costs.options, self.x)
                      for o, x in zip(opts, xs))
        if strategy == "sum":
            self.memory = costs.fixed_bytes + weights + sum(step_ws)
        else:
            w = h.addVariable(lb=0)
            for ws in step_ws:
                h.addConstr(w >= ws)
            self.memory = costs.fixed_bytes + weights + w

    def solve(self, objective) -> Solution:
        start = time.perf_counter()
        self.h.minimize(objective)
        status = self.h.getModelStatus()
        seconds = time.perf_counter() - start
        if status != highspy.HighsModelStatus.kOptimal:
            return Solution(None, float("inf"), seconds, self.h.modelStatusToString(status))
        choice = tuple(max(range(len(xs)), key=lambda p: self.h.val(xs[p])) for xs in self.x)
        return Solution(choice, self.h.getInfo().objective_function_value, seconds, "optimal")


def solve(costs: CostModel, minimise: str = "time", strategy: str = "sum",
          memory_budget: int | None = None, time_budget: float | None = None,
          cnn_ms: dict[str, float] | None = None, time_limit: float = TIME_LIMIT_S) -> Solution:
    """One ILP: minimise "time" (Eq. 13) or "memory" (Eq. 14, or Eq. 15 with strategy
    "workspace") under an optional memory budget (bytes), total time budget (ms) and per-CNN
    time budgets (ms per frame)."""
    m = _Model(costs, strategy, time_limit)
    if memory_budget is not None:
        m.h.addConstr(m.memory <= memory_budget)
    if time_budget is not None:
        m.h.addConstr(m.total_time <= time_budget)
    for cnn, ms in (cnn_ms or {}).items():
        m.h.addConstr(m.time[cnn] <= ms)
    return m.solve(m.total_time if minimise == "time" else m.memory)


def _point(costs: CostModel, strategy: str, choice, seconds: float) -> Point:
    ev = costs.evaluate(choice)
    return Point(tuple(choice), ev.time_ms, ev.memory[strategy], ev.ms, seconds)


def lexicographic(costs: CostModel, strategy: str, memory_budget: int | None = None,
                  cnn_ms: dict[str, float] | None = None,
                  time_limit: float = TIME_LIMIT_S) -> Point | None:
    """Least time under the budgets (Eq. 13), then least memory at that time (Eq. 14/15):
    a Pareto-optimal point."""
    first = solve(costs, "time", strategy, memory_budget, None, cnn_ms, time_limit)
    if first.choice is None:
        return None
    t = costs.evaluate(first.choice).time_ms
    second = solve(costs, "memory", strategy, memory_budget, t * (1 + 1e-9) + 1e-9, cnn_ms, time_limit)
    choice = second.choice if second.choice is not None else first.choice
    return _point(costs, strategy, choice, first.seconds + second.seconds)


def front(costs: CostModel, strategy: str = "sum", cnn_ms: dict[str, float] | None = None,
          max_points: int = 200, time_limit: float = TIME_LIMIT_S) -> Front:
    """The exact Pareto front (time, memory) by sweeping the memory budget downwards."""
    start = time.perf_counter()
    out = Front(strategy)
    budget = None
    while True:
        if len(out.points) >= max_points:
            out.complete = False
            break
        p = lexicographic(costs, strategy, budget, cnn_ms, time_limit)
        if p is None:
            break
        if budget is not None and p.memory_bytes > budget:   # solver tolerance: not a new point
            out.complete = False
            break
        out.points.append(p)
        budget = p.memory_bytes - 1
    out.seconds = time.perf_counter() - start
    return out


def greedy(costs: CostModel, memory_budget: int | None, strategy: str = "sum",
           start: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
    """TASO's greedy baseline (Sec. 5.3.2): from `start` (the paper's: the time-optimal
    selection, as PBQP finds it; default here: every layer's fastest primitive on its own,
    blind to layout transitions), while memory exceeds the budget, the layer whose chosen
    primitive has the largest footprint (weights + workspace) switches to the fastest of its
    primitives with a smaller footprint. None when no switch is left and the budget is
    still exceeded."""
    opts = costs.options
    foot = [[o.weight_bytes + o.workspace_bytes for o in layer] for layer in opts]
    choice = list(start) if start is not None else [
        min(range(len(layer)), key=lambda p: (layer[p].ms, foot[i][p])) for i, layer in enumerate(opts)]
    while memory_budget is not None and costs.evaluate(choice).memory[strategy] > memory_budget:
        movable = [i for i in range(len(opts)) if any(f < foot[i][choice[i]] for f in foot[i])]
        if not movable:
            return None
        i = max(movable, key=lambda k: (foot[k][choice[k]], -k))
        smaller = [p for p in range(len(opts[i])) if foot[i][p] < foot[i][choice[i]]]
        choice[i] = min(smaller, key=lambda p: (opts[i][p].ms, foot[i][p]))
    return tuple(choice)
