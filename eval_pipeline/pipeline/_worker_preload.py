"""What the server that model workers are forked from imports (`_model_processes`): the stages, then its objects frozen.

Frozen, the garbage collector of a worker never walks the objects the imports made, so their
memory pages stay shared with the server rather than copied into each worker. No other
module imports this one.
"""

import gc

import eval_pipeline.pipeline.stages  # noqa: F401 - imported for the workers

gc.freeze()
