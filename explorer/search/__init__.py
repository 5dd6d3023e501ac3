"""Algorithm 2: the search problem's interface (problem.py), the one NSGA-II loop (nsga2.py,
DEAP) and Algorithm 2's operators over it (genetic.py), the staged ladder search (staged.py)
with the descent from the least memory (descent.py), path relinking and Pareto local
search, parallel evaluation, the time budget and the fitted effort, progress, and picking
one point of the front.

May import: explorer.app, explorer.plan, csdf, sdf3.
"""
