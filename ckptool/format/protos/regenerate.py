"""Regenerate the committed ``*_pb2.py`` modules from the ``.proto`` files here.

Run from the repository root:

    python -m venv /tmp/protoc && /tmp/protoc/bin/pip install grpcio-tools==1.75.1
    /tmp/protoc/bin/python ckptool/format/protos/regenerate.py

grpcio-tools 1.75.1 bundles protoc 31.1, whose Python gencode runs on any
protobuf runtime from 6.31.1 on (the floor TensorFlow 2.21 itself requires),
so ckptool installs beside TensorFlow without a protobuf conflict.
"""

import os
import subprocess
import sys

import grpc_tools

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def main() -> None:
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    protos = sorted(f for f in os.listdir(HERE) if f.endswith(".proto"))
    for name in protos:
        rel = os.path.relpath(os.path.join(HERE, name), ROOT)
        subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}", f"-I{include}",
             f"--python_out={ROOT}", rel],
            check=True,
        )
        print("generated", rel.replace(".proto", "_pb2.py"))


if __name__ == "__main__":
    main()
