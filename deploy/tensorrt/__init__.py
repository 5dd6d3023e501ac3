"""TensorRT on the board: engines built from the same step models, and the board runner
(board_runner.py and its trt_*.py modules: self-contained, copied beside the deployment;
Python 3.6 on a Jetson TX2).

May import: sdf3.
"""
