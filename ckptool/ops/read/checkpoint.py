"""What every open checkpoint offers (:class:`Checkpoint`) and what listing returns
(:class:`Variable`); the V2 and V1 readers are in :mod:`ckptool.ops.read.v2` and
:mod:`ckptool.ops.read.v1`, :func:`ckptool.open` in :mod:`ckptool.ops.read.reader`."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from ckptool.errors import CkptError, CorruptError, ResourceError, TensorNotFoundError, UnsupportedError
from ckptool.format.entry import numel
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, ObjectGraph
from ckptool.format.objkeys import key_of as key_of  # re-exported
from ckptool.format.objkeys import name_of as name_of
from ckptool.io.layout.checkpoints import Located

if TYPE_CHECKING:  # numpy is imported where arrays are made: listing needs none of it
    import numpy as np

    from ckptool.format.dtypes import DType
    from ckptool.format.slices import Slice


class Variable(NamedTuple):
    """One listed tensor, as ``tf.train.list_variables`` shows it. Immutable; a
    named tuple because listing builds one per tensor (a frozen dataclass costs
    three times as much to build)."""

    name: str
    dtype: str  # TensorFlow's dtype name: "float32", "bfloat16", "string", ...
    shape: tuple[int, ...]
    nbytes: int  # bytes of tensor data stored on disk
    num_slices: int = 0  # > 0 for partitioned variables stored as slices

    @property
    def numel(self) -> int:
        return numel(self.shape)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "nbytes": self.nbytes}
        if self.num_slices:
            out["slices"] = self.num_slices
        return out


@contextmanager
def gc_paused(keep: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector while a listing builds its objects in bulk.

    Tens of thousands of new tuples and bytes (none of them in a cycle) would each
    700 allocations set off a collection that walks the young objects, and now and
    then every object of the process: 15% of listing 20,000 variables, more in a big
    process. Reference counting frees them as before; a collector the caller
    disabled stays disabled.

    ``keep``: the objects made are kept as long as the checkpoint (its listing): they
    are moved to the oldest generation at once (``gc.freeze()`` then ``gc.unfreeze()``,
    a move of two lists), not walked by the first young collection after the pause (a
    tenth of a listing's time). Not when the caller has frozen objects of its own
    (``unfreeze`` would thaw them)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if keep and not gc.get_freeze_count():
            gc.freeze()
            gc.unfreeze()
        gc.enable()


class Checkpoint:
    """An open checkpoint (what :func:`ckptool.open` returns). Use as a context manager, or
    call :meth:`close`. Also a read-only mapping of tensor names to values::

        with ckptool.open("runs/") as ckpt:
            len(ckpt)                       # how many variables
            "save_counter/.ATTRIBUTES/VARIABLE_VALUE" in ckpt
            for name in ckpt:               # names, sorted
                value = ckpt[name]          # ckpt.read(name); also ckpt.get_tensor(name)
    """

    format: str
    prefix: str

    def __init__(self, located: Located):
        self.storage = located.storage
        self.prefix = located.prefix
        self.format = located.format
        self._by_name: dict[str, Variable] | None = None

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<ckptool.Checkpoint {self.format} {self.prefix!r}>"

    def _variable_map(self) -> dict[str, Variable]:
        """Name -> Variable, built once per open checkpoint (lookups are O(1))."""
        if self._by_name is None:
            self._by_name = {v.name: v for v in self.variables()}
        return self._by_name

    def __contains__(self, name: str) -> bool:
        return name in self._variable_map()

    def __len__(self) -> int:
        """The number of variables (partitioned ones once)."""
        return len(self.variables())

    def __iter__(self) -> Iterator[str]:
        """The variable names, sorted as :meth:`variables` lists them."""
        return iter(self.names())

    def __getitem__(self, name: str) -> np.ndarray:
        """``ckpt[name]`` is :meth:`read`; a missing name is a :class:`~ckptool.TensorNotFoundError`
        (a ``KeyError``)."""
        return self.read(name)

    def get_tensor(self, name: str) -> np.ndarray:
        """:meth:`read` under the name ``tf.train.load_checkpoint(p).get_tensor`` has. Values are
        numpy arrays (0-d for scalars); :mod:`ckptool.compat.tf` gives TF's exact return types
        (numpy scalars, ``bytes``)."""
        return self.read(name)

    def names(self) -> list[str]:
        """The variable names, sorted."""
        return [v.name for v in self.variables()]

    def variable(self, name: str) -> Variable:
        v = self._variable_map().get(name)
        if v is None:
            raise self._not_found(name)
        return v

    def _not_found(self, name: str) -> TensorNotFoundError:
        from ckptool.ops.read.suggest import tensor_not_found

        return tensor_not_found(self.prefix, name, self.names())

    @property
    def is_object_based(self) -> bool:
        return OBJECT_GRAPH_KEY in self

    def object_graph_bytes(self) -> bytes | None:
        """The serialized object graph (a string scalar) of an object-based checkpoint, else None."""
        if not self.is_object_based:
            return None
        value = self.read(OBJECT_GRAPH_KEY)
        if value.dtype != object or value.size != 1:
            raise CorruptError(f"{self.prefix}: {OBJECT_GRAPH_KEY} is not a string scalar "
                               f"({value.dtype} {list(value.shape)})")
        return bytes(value.item() if value.shape == () else value.ravel()[0])

    def object_graph(self) -> ObjectGraph | None:
        """The parsed object graph of an object-based checkpoint, else None."""
        raw = self.object_graph_bytes()
        return None if raw is None else ObjectGraph.parse(raw, f"{self.prefix}: {OBJECT_GRAPH_KEY}")

    def total_bytes(self) -> int:
        return sum(v.nbytes for v in self.variables())

    def verify(self) -> Iterator[tuple[str, str | None]]:
        """Read every tensor with all checksums on; yield ``(name, error or None)``."""
        for v in self.variables():
            try:
                self.read(v.name, verify=True)
            except ResourceError:
                raise  # too many open files: no verdict on the tensor
            except CkptError as exc:
                yield v.name, str(exc)
            else:
                yield v.name, None

    # Subclasses implement:
    def variables(self) -> list[Variable]:  # pragma: no cover - abstract
        raise NotImplementedError

    def read(self, name: str, verify: bool = True) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


#: numpy's NPY_MAXDIMS; TensorFlow allows up to 254 dimensions.
NUMPY_MAX_DIMS = 64


def check_numpy_shape(shape: Sequence[int], dtype: DType, what: str) -> None:
    """A shape TF accepts but numpy cannot hold (over 64 dimensions, or a zero-size
    tensor whose other dimensions multiply past numpy's limit) is an UnsupportedError."""
    import numpy as np
    if len(shape) > NUMPY_MAX_DIMS:
        raise UnsupportedError(f"{what} has {len(shape)} dimensions; numpy arrays hold at most "
                               f"{NUMPY_MAX_DIMS}")
    n = max(1, dtype.itemsize)
    for d in shape:
        if d:
            n *= d
    if n > np.iinfo(np.intp).max:
        raise UnsupportedError(f"{what} has shape {list(shape)}, too large for a numpy array")


def check_tiling(slices: Sequence[Slice], shape: Sequence[int], where: str, name: str) -> None:
    """A CorruptError unless ``slices`` tile ``shape`` exactly once (before any allocation)."""
    from ckptool.format.slices import tiling_problem

    problem = tiling_problem(shape, slices)
    if problem is not None:
        raise CorruptError(f"{where}: partitioned tensor {name!r}: {problem}")
