"""Where each rule applies: the device kinds and frameworks of the windows it is for, and what it
needs (docs/definitions.md, "Advice": the rule tables' "applies to" column).

A window's kind is its framework (PyTorch, MindSpore, the built-in backend ...) and its device:
``npu`` (an Ascend window: torch_npu, MindSpore or msprof output with device tasks), ``gpu`` (a
Kineto trace with GPU kernels and their launches) or ``cpu`` (no device activity). A rule whose
scope leaves the window out is not run: ``advise()`` lists it apart, in one line, never as a
finding nor among the rules that found nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from dynprof_nb.traces.interface import Window

ALL_DEVICES = ("cpu", "gpu", "npu")
ASCEND_FRAMEWORKS = ("torch_npu", "ascend")
FRAMEWORK_NAMES = {
    "pytorch": "PyTorch",
    "torch": "PyTorch",
    "torch_npu": "PyTorch (torch_npu)",
    "mindspore": "MindSpore",
    "builtin": "built-in backend",
    "ascend": "Ascend",
    "chrome": "Chrome-trace",
}


@dataclass(frozen=True)
class Scope:
    """The windows a rule applies to: ``devices`` (of ``cpu``/``gpu``/``npu``), ``frameworks``
    (framework names as the loader reports them; empty: any) and ``needs`` (the files or
    frames it reads, said when it cannot run)."""

    devices: tuple[str, ...] = ALL_DEVICES
    frameworks: tuple[str, ...] = ()
    needs: str = ""

    @property
    def label(self) -> str:
        """A short name for what the scope is, e.g. ``Ascend-only``."""
        if self.devices == ("npu",):
            return "Ascend-only"
        if self.devices == ("gpu",):
            return "GPU-only"
        if self.devices == ("cpu", "gpu") and self.frameworks:
            return f"{FRAMEWORK_NAMES.get(self.frameworks[0], self.frameworks[0])} host-only"
        if self.devices == ("cpu", "gpu"):
            return "host-trace-only (CPU/GPU)"
        if self.devices == ("gpu", "npu"):
            return "device-only (GPU/NPU)"
        return "/".join(d.upper() for d in self.devices)

    def covers(self, device: str, framework: str) -> bool:
        if device not in self.devices:
            return False
        return not self.frameworks or framework in self.frameworks


def device_kind(w: Window) -> str:
    """``npu``, ``gpu`` or ``cpu`` (module docstring)."""
    fw = str(getattr(w, "framework", "") or "").lower()
    try:
        k = w.kernels
    except (LookupError, ValueError, AttributeError):
        k = None
    has_kernels = k is not None and not k.empty
    if fw in ASCEND_FRAMEWORKS or (fw == "mindspore" and has_kernels):
        return "npu"
    if has_kernels and "core" in k and k["core"].astype(str).str.match(r"AI_|MIX_|HCCL").any():
        return "npu"
    if has_kernels:
        return "gpu"
    return "cpu"


def framework_of(w: Window) -> str:
    return str(getattr(w, "framework", "") or "").lower()


def describe(device: str, framework: str) -> str:
    """E.g. ``a CPU PyTorch window``."""
    name = FRAMEWORK_NAMES.get(framework, framework or "unknown framework")
    article = "an" if device == "npu" else "a"
    return f"{article} {device.upper()} {name} window"


__all__ = ["ALL_DEVICES", "Scope", "describe", "device_kind", "framework_of"]
