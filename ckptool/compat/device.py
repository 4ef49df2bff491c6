"""``tf.device``: the placement scope conversion scripts open around their reads (``with
tf.device("/CPU:0"): reader = tf.train.load_checkpoint(...)``). ckptool reads on the CPU only, so
the scope places nothing; it checks the device name as TF 2.21's eager context does when the
scope is entered (a bad name is TF's ValueError, worded as TF words it)."""

from __future__ import annotations

from types import TracebackType
from typing import Any

#: The device types TF 2.21 (CPU build, no pluggable devices) parses in a short ``/TYPE:N`` part.
DEVICE_TYPES = ("CPU", "CUSTOM", "EPU", "GPU", "TPU")


def check_device_spec(spec: str | None) -> None:
    """Raise TF's ValueError for a device name TF's DeviceSpec cannot parse."""
    spec = spec or ""
    device_type = None
    fields: dict[str, str] = {}
    for part in (x.split(":") for x in spec.split("/")):
        n = len(part)
        if n == 2 and part[0] in ("job", "replica", "task"):
            fields[part[0]] = part[1]
        elif n in (1, 2) and part[0].upper() in DEVICE_TYPES or n == 3 and part[0] == "device":
            if device_type is not None:
                raise ValueError(f"Multiple device types are not allowed while parsing the device spec: {spec}.")
            device_type = part[1] if n == 3 else part[0].upper()
            index = part[-1] if n > 1 else "*"
            if index != "*":
                int(index)
        elif part[0] != "":
            raise ValueError(f"Unknown attribute '{part[0]}' is encountered while parsing the device spec: '{spec}'.")
    for field in ("replica", "task"):  # converted once parsed, the last given of each, as int() words a bad one
        if field in fields:
            int(fields[field])


class DeviceScope:
    """What ``tf.device(name)`` returns: a context manager whose ``__enter__`` checks the name."""

    def __init__(self, name: Any) -> None:
        self._name = name

    def __enter__(self) -> None:
        if self._name is not None and not isinstance(self._name, str):
            raise ValueError(f"Expecting a string device name. Got {type(self._name)}({self._name})")
        check_device_spec(self._name)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None


def device(device_name: Any) -> DeviceScope:
    """``tf.device``: a scope that places nothing (ckptool reads on the CPU), checking the name as TF does."""
    if callable(device_name):
        raise RuntimeError("tf.device does not support functions.")
    return DeviceScope(device_name)


def device_v1(device_name_or_function: Any) -> DeviceScope:
    """``tf.compat.v1.device``: as ``tf.device`` (TF 2 runs eagerly: no device functions)."""
    if callable(device_name_or_function):
        raise RuntimeError("tf.device does not support functions when eager execution is enabled.")
    return DeviceScope(device_name_or_function)
