"""Looking inside a checkpoint, by operation: :mod:`~ckptool.ops.inspect.summary`,
:mod:`~ckptool.ops.inspect.values`, :mod:`~ckptool.ops.read.chunks`, :mod:`~ckptool.ops.inspect.stats`,
:mod:`~ckptool.ops.inspect.verify` and :mod:`~ckptool.ops.inspect.tree`. This module gathers their
public names for callers that import them from one place."""

from ckptool.format.objgraph import OBJECT_GRAPH_KEY
from ckptool.ops.inspect.stats import iter_tensors_stats, tensor_stats, tensors_stats
from ckptool.ops.inspect.summary import directory_state, iso_time, summary
from ckptool.ops.inspect.tree import TreeNode, tree
from ckptool.ops.inspect.values import json_value, tensor_json
from ckptool.ops.inspect.verify import Problem, VerifyReport, verify
from ckptool.ops.read.chunks import CHUNK_BYTES, entry_chunks, tensor_chunks

__all__ = ["summary", "directory_state", "iso_time", "json_value", "tensor_json", "tensor_chunks",
           "entry_chunks", "tensor_stats", "tensors_stats",
           "iter_tensors_stats", "verify", "VerifyReport", "Problem", "tree", "TreeNode",
           "CHUNK_BYTES", "OBJECT_GRAPH_KEY"]
