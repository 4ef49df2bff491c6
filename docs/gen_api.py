"""Generate the API reference in docs/api/ from the docstrings, with pdoc.

    python docs/gen_api.py [OUTDIR]        # default: docs/api next to this file

Needs ``pip install -e '.[docs]'`` (pdoc, pinned: its output is compared byte for byte by
tests/compat/test_api_docs.py). The public surface only: the package root (open, write, the
operations, the errors, Checkpoint), ckptool.api, ckptool.compat (tf.train without TF),
ckptool.shim and ckptool.errors; the layers below (format, io, ops, cli) are internal.
"""

from __future__ import annotations

import pathlib
import sys

MODULES = ["ckptool", "ckptool.api", "ckptool.errors", "ckptool.shim", "ckptool.compat"]  # compat: recursive


def generate(out: pathlib.Path) -> list[pathlib.Path]:
    import pdoc
    import pdoc.render

    pdoc.render.configure(docformat="restructuredtext", show_source=False, search=False,
                          include_undocumented=True, footer_text="ckptool")
    pdoc.pdoc(*MODULES, output_directory=out)
    return sorted(p for p in out.rglob("*") if p.is_file())


if __name__ == "__main__":
    root = pathlib.Path(__file__).resolve().parent
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "api"
    files = generate(out)
    print(f"{len(files)} files in {out}")
