"""Reading Keras 3 weight files as checkpoints: ``X.weights.h5``, ``X.keras`` (a zip holding
``config.json``, ``metadata.json`` and ``model.weights.h5``) and sharded ``X.weights.json`` beside
``X_NNNNN.weights.h5``, laid out as Keras 3's ``keras.src.saving.saving_lib`` writes them
(docs/FORMAT.md §14.1).

Names are the HDF5 paths of the datasets (``layers/dense/vars/0``). HDF5 is read through h5py,
the optional extra ``ckptool[keras]``. What Keras refuses is refused here too: soft and external
links, external and virtual datasets, and datasets that declare more bytes than their file
could hold (or, compressed, over 1000 times what they store beyond 4 GiB: a shape bomb).
bfloat16 (a 2-byte opaque type with a ``dtype`` attribute) reads as ``ml_dtypes.bfloat16``.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, CorruptError, MissingError, UnsupportedError
from ckptool.format.keras3 import Saved, layer_classes, numbered, weights_order
from ckptool.io.layout.checkpoints import Located
from ckptool.io.readerfile import ReaderFile
from ckptool.ops.read.checkpoint import Checkpoint, Variable, key_of
from ckptool.ops.read.keras_zip import JSON_LIMIT, open_member, read_json_member

if TYPE_CHECKING:
    import numpy as np

KERAS = "keras"
#: File name endings read as Keras 3 files.
SUFFIXES = (".weights.h5", ".keras", ".weights.json")
WEIGHTS_MEMBER = "model.weights.h5"
_BOMB_FLOOR = 1 << 32
_BOMB_RATIO = 1000


def is_keras_path(path: str) -> bool:
    return path.lower().rstrip("/").endswith(SUFFIXES)


def import_h5py() -> Any:
    """h5py, or an error naming the extra that brings it."""
    try:
        import h5py
    except ImportError:
        raise UnsupportedError("reading and writing Keras 3 files (.weights.h5, .keras) needs h5py: "
                               "pip install 'ckptool[keras]'") from None
    return h5py


@dataclass
class KerasLayer:
    """A saved object of a Keras file: its group path, the ``name`` attribute of its ``vars``
    group (the layer's name, Keras >= 3.6) and its class (from ``config.json``)."""

    path: str
    name: str
    class_name: str
    variables: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name, "class": self.class_name, "variables": self.variables}


@dataclass
class _Entry:
    file: int  # index into the open h5 files
    path: str  # HDF5 path without the leading '/'
    dtype: Any  # numpy dtype of the value (bfloat16 for Keras's opaque bfloat16)
    shape: tuple[int, ...]


def _attr_text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def scan_h5(h5: Any, where: str, size: int, file_index: int = 0) -> tuple[list[_Entry], dict[str, str]]:
    """Every dataset of an open h5 file (links and layouts checked as Keras checks them), and
    every ``vars`` group's owner path -> its ``name`` attribute. A damaged file is a
    CorruptError, whatever h5py raised. Object-header addresses say nothing of Keras's order
    (HDF5 reuses freed space): they only tell a group reached twice."""
    try:
        return _scan(h5, where, size, file_index)
    except (OSError, ValueError, KeyError, RuntimeError, TypeError) as exc:
        raise CorruptError(f"{where}: damaged HDF5 file: {exc}") from None


def _scan(h5: Any, where: str, size: int, file_index: int) -> tuple[list[_Entry], dict[str, str]]:
    import ml_dtypes
    import numpy as np

    h5py = import_h5py()
    entries: list[_Entry] = []
    groups: dict[str, str] = {}
    stack = [("", h5)]
    seen_groups: set[int] = set()
    while stack:
        base, group = stack.pop()
        for name in group:
            link = group.get(name, getclass=True, getlink=True)
            full = f"{base}/{name}" if base else name
            if link in (h5py.SoftLink, h5py.ExternalLink):
                raise UnsupportedError(f"{where}: {full!r} is a {link.__name__}, which Keras refuses to load")
            obj = group[name]
            addr = int(h5py.h5o.get_info(obj.id).addr)
            if isinstance(obj, h5py.Group):
                if addr in seen_groups:  # a hard link back into the tree: Keras would loop too
                    raise CorruptError(f"{where}: group {full!r} is reached twice (a hard-linked group)")
                seen_groups.add(addr)
                if name == "vars":
                    groups[base] = _attr_text(obj.attrs.get("name", ""))
                stack.append((full, obj))
                continue
            if not isinstance(obj, h5py.Dataset):
                raise UnsupportedError(f"{where}: {full!r} is neither a group nor a dataset")
            if obj.external:
                raise UnsupportedError(f"{where}: dataset {full!r} keeps its data in external files, "
                                       "which Keras refuses to load")
            if obj.is_virtual:
                raise UnsupportedError(f"{where}: dataset {full!r} is a virtual dataset, which Keras refuses to load")
            dt = obj.dtype
            if dt.kind == "V" and dt.itemsize == 2 and _attr_text(obj.attrs.get("dtype", "")) == "bfloat16":
                dt = np.dtype(ml_dtypes.bfloat16)
            if dt.kind == "O" and not h5py.check_string_dtype(dt):
                what = "object references" if h5py.check_ref_dtype(dt) is not None else "variable-length sequences"
                raise UnsupportedError(f"{where}: dataset {full!r} holds HDF5 {what}, which have no TensorFlow "
                                       "equivalent")
            if dt.names is not None:
                raise UnsupportedError(f"{where}: dataset {full!r} is of a compound type {dt}, which has no "
                                       "TensorFlow equivalent")
            if obj.shape is None:
                raise UnsupportedError(f"{where}: dataset {full!r} is empty (a null dataspace), not an array")
            shape = tuple(int(d) for d in obj.shape)
            declared = dt.itemsize
            for d in shape:
                declared *= d
            stored = obj.id.get_storage_size()
            if (not obj.compression and declared > size) or (
                    declared > _BOMB_FLOOR and declared > _BOMB_RATIO * stored):
                raise CorruptError(f"{where}: dataset {full!r} declares shape {list(shape)} ({declared} bytes), "
                                   f"more than the file holds ({size} bytes on disk, {stored} stored)")
            entries.append(_Entry(file_index, full, dt, shape))
    return entries, groups


class KerasCheckpoint(Checkpoint):
    """A Keras 3 weights file, read as a checkpoint (names are HDF5 paths)."""

    def __init__(self, path: str):
        from ckptool.io.backends.urls import is_url, storage_for

        storage, local = storage_for(path)
        if local != path or is_url(path):  # h5py reads the HDF5 file by its path
            raise UnsupportedError(f"{path}: Keras files are read from local paths only")
        super().__init__(Located(storage, path.rstrip("/"), KERAS))
        self.path = self.prefix
        self.files: list[str] = []
        self.config: Any = None
        self.metadata: Any = None
        self._h5: list[Any] = []
        self._zip: zipfile.ZipFile | None = None
        self._windows: list[Any] = []  # the open members h5py reads
        try:
            self._open()
        except BaseException:
            self.close()
            raise
        self._variables: list[Variable] | None = None

    # -- opening ---------------------------------------------------------------

    def _open(self) -> None:
        p = self.path
        st = self.storage
        if not st.isfile(p):
            raise MissingError(f"{p}: no such file")
        low = p.lower()
        if low.endswith(".keras"):
            self._open_keras(p)
        elif low.endswith(".weights.json"):
            self._open_sharded(p)
        else:
            self._add_h5(p, p, st.size(p))
        self.files = [p] if not self.files else self.files
        self.entries: dict[str, _Entry] = {}
        self.groups: dict[str, tuple[str, int]] = {}  # vars group's owner -> (name attribute, file)
        for i, (h5, where, size) in enumerate(self._opened):
            entries, groups = scan_h5(h5, where, size, i)
            for e in entries:
                if e.path in self.entries:
                    raise CorruptError(f"{where}: dataset {e.path!r} is also in another shard")
                self.entries[e.path] = e
            for g, name in groups.items():
                self.groups.setdefault(g, (name, i))

    def _add_h5(self, source: Any, where: str, size: int) -> None:
        h5py = import_h5py()
        if not hasattr(self, "_opened"):
            self._opened: list[tuple[Any, str, int]] = []
        try:
            h5 = h5py.File(source, "r")
        except OSError as exc:
            raise CorruptError(f"{where}: not a readable HDF5 file: {exc}") from None
        self._h5.append(h5)
        self._opened.append((h5, where, size))

    def _open_keras(self, p: str) -> None:
        try:
            archive = io.BufferedReader(ReaderFile.of(self.storage.open_reader(p)))
            self._windows.append(archive)  # closed with the checkpoint (a ZipFile leaves a file object open)
            self._zip = zf = zipfile.ZipFile(archive)
            names = set(zf.namelist())
            if WEIGHTS_MEMBER not in names:
                hint = " (it has model.weights.npz, which ckptool does not read)" \
                    if "model.weights.npz" in names else ""
                raise CorruptError(f"{p}: a .keras file without {WEIGHTS_MEMBER}{hint}")
            for member, attr in (("config.json", "config"), ("metadata.json", "metadata")):
                if member in names:
                    setattr(self, attr, read_json_member(zf, member, p))
            info = zf.getinfo(WEIGHTS_MEMBER)
            source = open_member(zf, info, p)
            self._windows.append(source)
        except zipfile.BadZipFile as exc:
            raise CorruptError(f"{p}: not a .keras (zip) file: {exc}") from None
        self._add_h5(source, f"{p}:{WEIGHTS_MEMBER}", info.file_size)

    def _open_sharded(self, p: str) -> None:
        doc = read_json_file(p, "a sharded-weights index")
        wmap = doc.get("weight_map") if isinstance(doc, dict) else None
        if not isinstance(wmap, dict):
            raise CorruptError(f"{p}: no 'weight_map' object")
        shards: list[str] = []
        for v in wmap.values():
            for f in [v] if isinstance(v, str) else v if isinstance(v, list) else [None]:
                if not isinstance(f, str) or "/" in f or "\\" in f or f in ("", ".", ".."):
                    raise CorruptError(f"{p}: weight_map names {f!r}, not a file beside it")
                if f not in shards:
                    shards.append(f)
        st = self.storage
        d = st.dirname(p)
        for f in shards:
            sp = st.join(d, f)
            if not st.isfile(sp):
                raise MissingError(f"{p}: shard {f} is missing")
            self.files.append(sp)
            self._add_h5(sp, sp, st.size(sp))
        if not shards:
            raise CorruptError(f"{p}: the weight_map names no shard")
        self.files.insert(0, p)

    def close(self) -> None:
        for h5 in self._h5:
            try:
                h5.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        self._h5 = []
        if self._zip is not None:
            self._zip.close()
            self._zip = None
        for w in self._windows:
            w.close()
        self._windows = []

    def __repr__(self) -> str:
        return f"<ckptool.Checkpoint keras {self.path!r}>"

    # -- the Checkpoint API ----------------------------------------------------

    def variables(self) -> list[Variable]:
        if self._variables is None:
            out = []
            from ckptool.format import dtypes

            for name in sorted(self.entries, key=key_of):
                e = self.entries[name]
                numel = 1
                for d in e.shape:
                    numel *= d
                try:
                    dt = dtypes.from_numpy(e.dtype).name
                except UnsupportedError as exc:
                    raise UnsupportedError(f"{self.path}: dataset {name!r}: {exc}") from None
                out.append(Variable(name, dt, e.shape, numel * e.dtype.itemsize))
            self._variables = out
        return self._variables

    def read(self, name: str, verify: bool = True) -> np.ndarray:
        import numpy as np

        e = self.entries.get(name) or self.entries.get(name[:-2] if name.endswith(":0") else name)
        if e is None:
            raise self._not_found(name)
        h5 = self._h5[e.file]
        try:
            ds = h5[e.path]
            raw = ds[()]
        except (OSError, ValueError, KeyError) as exc:
            raise CorruptError(f"{self.path}: dataset {e.path!r}: cannot read: {exc}") from None
        arr = np.asarray(raw)
        if arr.dtype != e.dtype:
            arr = arr.view(e.dtype) if arr.dtype.itemsize == e.dtype.itemsize else arr.astype(e.dtype)
        return arr.reshape(e.shape)

    def layers(self) -> list[KerasLayer]:
        """Each saved object (a ``vars`` group) with its name and class, in Keras's own order
        (:func:`ckptool.format.keras3.weights_order`: the config's where it has one, nested
        sub-layers after their layer, ``dense_2`` before ``dense_10``), the optimizer last."""
        classes = layer_classes(self.config) if self.config is not None else {}
        saved = []
        for path, (name, _fi) in self.groups.items():
            prefix = f"{path}/vars/" if path else "vars/"
            own = [n for n in self.entries if n.startswith(prefix) and "/" not in n[len(prefix):]]
            own.sort(key=lambda n: int(n[len(prefix):]) if n[len(prefix):].isdigit() else 1 << 30)
            cls = classes.get(name, "")
            if not cls and path == "" and isinstance(self.config, dict):
                cls = str(self.config.get("class_name", ""))
            saved.append(Saved(path, name, cls, own))
        model = weights_order(saved, self.config).objects
        rest = sorted((s for s in saved if s.path.split("/", 1)[0] == "optimizer"), key=lambda s: numbered(s.path))
        return [KerasLayer(s.path, s.label, s.class_name, s.variables) for s in model + rest
                if s.path in self.groups]


def read_json_file(path: str, what: str, limit: int = JSON_LIMIT) -> Any:
    """A JSON document in a file (through its Storage, at most ``limit`` bytes read), by
    :func:`ckptool.format.json_doc.load_json`: anything wrong is one error naming the file."""
    from ckptool.format.json_doc import load_json
    from ckptool.io.backends.urls import storage_for
    from ckptool.io.oserrors import os_error

    storage, local = storage_for(path)
    try:
        r = storage.open_reader(local)
        try:
            if r.size > limit:
                raise CorruptError(f"{path}: over {limit >> 20} MiB, more than {what}")
            data = bytes(r.read(0, r.size))
        finally:
            r.close()
    except OSError as exc:
        raise os_error(path, exc, "read") from None
    return load_json(data, path, max_bytes=limit, what=what)


def read_model_config(path: str, flag: str = "--template-config") -> Any:
    """A Keras 3 model's config as ``model.to_json()`` writes it (``--template-config``), the
    layer order and optimizer a ``.weights.h5`` does not record (:mod:`ckptool.format.keras3`)."""
    from ckptool.errors import UsageError
    from ckptool.format.json_doc import load_json

    try:
        doc = read_json_file(path, "JSON")
    except MissingError:
        raise MissingError(f"{path}: no such file ({flag})") from None
    if isinstance(doc, str):  # json.dump(model.to_json()): the string, quoted again
        try:
            doc = load_json(doc, path, max_bytes=JSON_LIMIT, what="JSON")
        except CorruptError:
            pass
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise UsageError(f"{path}: not a Keras model config (model.to_json() writes an object with 'class_name' "
                         "and 'config')")
    return doc


def open_keras(path: str) -> KerasCheckpoint:
    try:
        return KerasCheckpoint(path)
    except OSError as exc:
        raise CkptError(f"{path}: cannot read: {exc.strerror or exc}") from None


__all__ = ["JSON_LIMIT", "KERAS", "SUFFIXES", "KerasCheckpoint", "KerasLayer", "import_h5py", "is_keras_path",
           "layer_classes", "open_keras", "read_json_file", "read_json_member", "read_model_config", "scan_h5"]
