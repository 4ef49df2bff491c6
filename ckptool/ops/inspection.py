"""Looking inside a checkpoint, by operation: :mod:`~ckptool.ops.summary`,
:mod:`~ckptool.ops.values`, :mod:`~ckptool.ops.chunks`, :mod:`~ckptool.ops.stats`,
:mod:`~ckptool.ops.verify` and :mod:`~ckptool.ops.tree`. This module gathers their
public names for callers that import them from one place."""

from ckptool.format.objgraph import OBJECT_GRAPH_KEY
from ckptool.ops.chunks import CHUNK_BYTES, entry_chunks, tensor_chunks
from ckptool.ops.stats import tensor_stats
from ckptool.ops.summary import directory_state, iso_time, summary
from ckptool.ops.tree import TreeNode, tree
from ckptool.ops.values import json_value, tensor_json
from ckptool.ops.verify import Problem, VerifyReport, verify

__all__ = ["summary", "directory_state", "iso_time", "json_value", "tensor_json", "tensor_chunks",
           "entry_chunks", "tensor_stats", "verify", "VerifyReport", "Problem", "tree", "TreeNode",
           "CHUNK_BYTES", "OBJECT_GRAPH_KEY"]
