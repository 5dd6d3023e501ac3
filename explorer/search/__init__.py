"""Algorithm 2: NSGA-II over the genes (DEAP), parallel evaluation, path relinking,
Pareto local search, and picking one point of the front.

May import: explorer.app, explorer.plan, csdf, sdf3.
"""
