"""The model's config for ``convert --to hf``: read from the release's own file (BERT's
``bert_config.json``, GPT-2's ``hparams.json``, a GPT-Neo run's JSON, T5's ``operative_config.gin``)
or an HF ``config.json`` (it has a ``model_type``), translated to transformers' names, then checked
against and completed from the tensors (:func:`ckptool.ops.transform.hf.weightmap.complete`).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from ckptool.errors import CkptError, MissingError
from ckptool.format.json_doc import load_json
from ckptool.ops.transform.hf.weightmap import Arch

#: the config files of the releases, looked for when --config names a directory
RELEASE_FILES = ("config.json", "bert_config.json", "albert_config.json", "hparams.json", "operative_config.gin",
                 "net_config.json")  # the last: Funnel-Transformer's
#: what transformers writes itself; an HF config.json is taken as it is but for these
MAX_CONFIG = 64 << 20
_HF_OWN = ("transformers_version", "_name_or_path", "architectures", "model_type", "torch_dtype", "dtype")


def read_config(path: str) -> tuple[dict[str, Any], bool]:
    """``(settings, is_hf)`` from a JSON or gin file."""
    from ckptool.io.backends.urls import storage_for

    storage, local = storage_for(path)
    if storage.isdir(local):
        found = [n for n in RELEASE_FILES if storage.isfile(storage.join(local, n))]
        if not found:
            raise MissingError(f"{path}: no config here ({', '.join(RELEASE_FILES)})")
        path = local = storage.join(local, found[0])
    if not storage.exists(local):
        raise MissingError(f"{path}: no such file")
    if storage.size(local) > MAX_CONFIG:
        raise CkptError(f"{path}: over {MAX_CONFIG} bytes: not a model's config")
    try:
        text = storage.read_bytes(local).decode("utf-8")
    except UnicodeDecodeError:
        raise CkptError(f"{path}: not a text file (a JSON config or T5's operative_config.gin)") from None
    if path.lower().endswith(".gin") or not text.lstrip().startswith("{"):
        return parse_gin(text, path), False
    doc = load_json(text, path, max_bytes=MAX_CONFIG, what="a JSON config")
    if not isinstance(doc, dict):
        raise CkptError(f"{path}: not a JSON object")
    return doc, "model_type" in doc


def beside(src: str) -> str | None:
    """The release's config file in the checkpoint's directory, if there is one (``--config`` left out)."""
    from ckptool.io.backends.urls import storage_for

    storage, local = storage_for(src)
    d = local if storage.isdir(local) else (storage.dirname(local) or ".")
    found = [n for n in RELEASE_FILES if storage.isfile(storage.join(d, n))] if storage.isdir(d) else []
    return storage.join(d, found[0]) if found else None


def translate(doc: dict[str, Any], is_hf: bool, arch: Arch) -> dict[str, Any]:
    """transformers' settings from a release's config (``arch.keys``; the rest kept only when the
    release uses transformers' own names), or an HF config without what transformers writes itself."""
    if is_hf:
        out = {k: v for k, v in doc.items() if k not in _HF_OWN}
        out["model_type"] = doc["model_type"]
        return out
    out = {}
    for k, v in doc.items():
        if k in arch.keys:
            out[arch.keys[k]] = v
        elif arch.passthrough and not k.startswith("_"):
            out[k] = v
    for k, table in arch.values.items():
        if k in out:
            v = out[k]
            if not isinstance(v, (str, int, float)) or v not in table:
                said = next((rk for rk, hk in arch.keys.items() if hk == k and rk in doc), k)
                raise CkptError(f"the config's {said} is {v!r}: {arch.name}'s original code has no such setting "
                                f"that transformers computes (known: {', '.join(map(str, table))})")
            out[k] = table[v]
    return out


# --------------------------------------------------------------------------- gin


def _statements(text: str) -> list[str]:
    """Whole ``key = value`` statements: comments dropped, continuation lines and open brackets joined."""
    out, buf, depth = [], "", 0
    for raw in text.splitlines():
        line = re.sub(r"#.*", "", raw) if "'" not in raw and '"' not in raw else raw
        line = line.rstrip()
        cont = line.endswith("\\")
        buf += " " + line.rstrip("\\").strip()
        depth += sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")
        if not cont and depth <= 0:
            if buf.strip():
                out.append(buf.strip())
            buf, depth = "", 0
    if buf.strip():
        out.append(buf.strip())
    return out


def parse_gin(text: str, where: str) -> dict[str, Any]:
    """The bindings of a gin file (``d_model = 512``, ``DenseReluDense.activation = ['gelu', 'linear']``),
    ``%macro`` references resolved; a value that is not a Python literal is kept as its text."""
    out: dict[str, Any] = {}
    for st in _statements(text):
        if st.startswith(("import ", "include ", "from ")) or "=" not in st:
            continue
        key, _, value = st.partition("=")
        key, value = key.strip(), value.strip()
        if not re.fullmatch(r"[\w./]+", key):
            continue
        if value.startswith("%") and value[1:] in out:
            out[key] = out[value[1:]]
            continue
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            out[key] = value
    if not out:
        raise CkptError(f"{where}: no settings found (a JSON config, or T5's operative_config.gin)")
    return out


__all__ = ["beside", "parse_gin", "read_config", "translate"]
