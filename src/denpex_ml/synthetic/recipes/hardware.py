"""Recipes for GPU and hardware faults: ECC, fallen off the bus, illegal access, driver mismatch, NVLink."""

from __future__ import annotations

from denpex_ml.synthetic.fragments import c10_header, native_frames, nccl_prefix, traceback
from denpex_ml.synthetic.recipes.base import Recipe, crash_with_fallout, script_frames, teardown
from denpex_ml.synthetic.scenario import Scenario

__all__ = ["RECIPES"]

_PCI = ("0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00", "0000:9a:00", "0000:ab:00", "0000:ba:00", "0000:db:00")

_ASYNC = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"
)


def _dmesg(sc: Scenario, text: str) -> str:
    style = sc.rng.randrange(3)
    if style == 0:
        return f"[{sc.rng.uniform(1e4, 9e6):.6f}] {text}"
    if style == 1:
        return f"kernel: {text}"
    return f"{sc.when(sc.fail_time):%b %d %H:%M:%S} {sc.host(sc.initiator or 0)} kernel: {text}"


def _cuda_error(sc: Scenario, what: str) -> str:
    return f"RuntimeError: CUDA error: {what}\n{_ASYNC}" + (
        "" if sc.old else "\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
    )


def _watchdog_cuda(sc: Scenario, rank: int, t: float, what: str) -> str:
    tag = f"[Rank {rank}]" if sc.old else f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    head = c10_header(sc, rank, t, "E", "ProcessGroupNCCL.cpp:1595" if not sc.old else "ProcessGroupNCCL.cpp:916")
    return (
        f"{head} {tag} {'NCCL watchdog thread' if sc.old else 'Process group watchdog thread'} terminated with exception: CUDA error: {what}\n{_ASYNC}\n\n"
        f"Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 (most recent call first):\n"
        f"{native_frames(sc, 'c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)', 4)}\n\n"
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        f"  what():  {tag} Process group watchdog thread terminated with exception: CUDA error: {what}"
    )


def _ecc(sc: Scenario) -> None:
    v = sc.pick_variant(("python-error", "watchdog", "xid48", "xid94-95", "row-remap"))
    rng = sc.rng
    init = sc.initiator or 0
    t = rng.uniform(300, 200000)
    sc.fail_time = t
    pci = _PCI[sc.local_of(init) % len(_PCI)]
    node = sc.node_of(init)
    if v in ("xid48", "xid94-95", "row-remap"):
        xid = {
            "xid48": "48, pid=%d, name=python3, DBE (double bit error) ECC error",
            "xid94-95": "95, pid=%d, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No",
            "row-remap": "63, pid=%d, Row Remapper: New row marked for remapping, reset gpu to activate.",
        }[v]
        sc.root(None, t - 0.5, _dmesg(sc, f"NVRM: Xid (PCI:{pci}): {xid % sc.pid(init)}"), node=node)
    if v == "watchdog" or (v != "python-error" and sc.chance(0.5)):
        text = _watchdog_cuda(sc, init, t, "uncorrectable ECC error encountered")
    else:
        text = traceback(
            sc,
            script_frames(
                sc, ("sp:torch/nn/modules/linear.py", 116, "forward", "return F.linear(input, self.weight, self.bias)")
            ),
            _cuda_error(sc, "uncorrectable ECC error encountered"),
        )
    crash_with_fallout(sc, t, text, exitcode=-6)
    if v == "row-remap" and sc.chance(0.5):
        sc.context(
            None,
            t + 600,
            f"    Remapped Rows\n        Correctable Error                 : 0\n        Uncorrectable Error               : {rng.randint(1, 4)}\n        Pending                           : Yes\n        Remapping Failure Occurred        : No",
            node=node,
        )


def _fallen_off(sc: Scenario) -> None:
    v = sc.pick_variant(("xid79", "unknown-error", "nvidia-smi", "aer"))
    rng = sc.rng
    init = sc.initiator or 0
    t = rng.uniform(300, 200000)
    sc.fail_time = t
    pci = _PCI[sc.local_of(init) % len(_PCI)]
    node = sc.node_of(init)
    if v in ("xid79", "aer") or sc.chance(0.4):
        sc.root(
            None,
            t - 0.2,
            _dmesg(sc, f"NVRM: Xid (PCI:{pci}): 79, pid={sc.pid(init)}, name=python3, GPU has fallen off the bus.")
            + "\n"
            + _dmesg(sc, f"NVRM: GPU {pci}.0: GPU has fallen off the bus."),
            node=node,
        )
    if v == "aer":
        sc.context(
            None,
            t - 1,
            "\n".join(
                _dmesg(
                    sc,
                    "pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)",
                )
                for _ in range(rng.randint(2, 4))
            ),
            node=node,
        )
    if v == "nvidia-smi":
        sc.root(None, t + 900, f"Unable to determine the device handle for GPU{pci}.0: Unknown Error", node=node)
    what = rng.choice(("unknown error", "unspecified launch failure"))
    text = (
        _watchdog_cuda(sc, init, t, what) if sc.chance(0.5) else traceback(sc, script_frames(sc), _cuda_error(sc, what))
    )
    crash_with_fallout(sc, t, text, exitcode=-6)


def _illegal_access(sc: Scenario) -> None:
    v = sc.pick_variant(("watchdog", "python", "nccl-warn", "triton", "xid31"))
    rng = sc.rng
    init = sc.initiator or 0
    t = rng.uniform(60, 90000)
    sc.fail_time = t
    what = "an illegal memory access was encountered"
    extra = []
    if v == "nccl-warn":
        extra.append(
            f"{nccl_prefix(sc, init, 11)} include/alloc.h:50 NCCL WARN Cuda failure '{what}'\n{nccl_prefix(sc, init, 11)} NCCL INFO channel.cc:20 -> 1"
        )
    if v == "xid31":
        pci = _PCI[sc.local_of(init) % len(_PCI)]
        sc.root(
            None,
            t - 0.1,
            _dmesg(
                sc,
                f"NVRM: Xid (PCI:{pci}): 31, pid={sc.pid(init)}, name=python3, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2a_4c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
            ),
            node=sc.node_of(init),
        )
    if v == "triton":
        text = traceback(
            sc,
            script_frames(
                sc,
                ("sp:triton/runtime/jit.py", 691, "run", "kernel.run(grid_0, grid_1, grid_2, stream, kernel.function,"),
                ("sp:triton/backends/nvidia/driver.py", 365, "__call__", "self.launch(*args, **kwargs)"),
            ),
            f"RuntimeError: Triton Error [CUDA]: {what}",
        )
    elif v in ("watchdog", "xid31"):
        text = (
            f"{c10_header(sc, init, t, 'W', 'CUDAGuardImpl.h:119')} Warning: CUDA warning: {what} (function destroyEvent)\n"
            + _watchdog_cuda(sc, init, t, what)
        )
    else:
        text = traceback(
            sc,
            script_frames(sc, ("sp:torch/autograd/__init__.py", 267, "backward", "_engine_run_backward(")),
            _cuda_error(sc, what),
        )
    crash_with_fallout(sc, t, text, exitcode=-6, extra_root=extra)


def _driver(sc: Scenario) -> None:
    v = sc.pick_variant(("insufficient", "no-kernel-image", "undefined-nccl", "driver-too-old", "sm-not-compatible"))
    rng = sc.rng
    t = rng.uniform(2, 60)
    sc.fail_time = t
    texts = {
        "insufficient": _cuda_error(sc, "CUDA driver version is insufficient for CUDA runtime version"),
        "no-kernel-image": _cuda_error(sc, "no kernel image is available for execution on the device"),
        "undefined-nccl": f"ImportError: {sc.env.sp('torch/lib/libtorch_cuda.so')}: undefined symbol: ncclCommRegister",
        "driver-too-old": f"RuntimeError: The NVIDIA driver on your system is too old (found version {rng.choice((11040, 11020, 12020))}). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver.",
        "sm-not-compatible": "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    }
    if v == "sm-not-compatible":
        sc.context(
            sc.initiator,
            t - 1,
            f"{sc.env.sp('torch/cuda/__init__.py')}:215: UserWarning: \nNVIDIA H100 80GB HBM3 with CUDA capability sm_90 is not compatible with the current PyTorch installation.\nThe current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70 sm_75 sm_80.",
            stream="stderr",
        )
    one_node = sc.chance(0.5) and len(sc.nodes) > 1
    ranks = [r for r in sc.visible if sc.node_of(r) == sc.node_of(sc.initiator or 0)] if one_node else list(sc.visible)
    if not one_node and sc.chance(0.4):
        sc.set_initiator(None)
    frames = script_frames(sc, ("sp:torch/cuda/__init__.py", 302, "_lazy_init", "torch._C._cuda_init()"))
    first = sc.initiator if sc.initiator is not None else ranks[0]
    for r in ranks:
        role = "root" if r == first or sc.initiator is None else "symptom"
        sc.emit(r, t + (0 if r == first else 0.1 + sc.jitter(0.8)), traceback(sc, frames, texts[v]), role)
    teardown(sc, t + 2, [(r, 1) for r in ranks[:6]])


def _nvlink(sc: Scenario) -> None:
    v = sc.pick_variant(("xid74", "fm-802", "nvls-401", "xid145-45"))
    rng = sc.rng
    init = sc.initiator or 0
    node = sc.node_of(init)
    pci = _PCI[sc.local_of(init) % len(_PCI)]
    if v == "fm-802":
        sc.set_initiator(None)
        t = rng.uniform(2, 30)
        sc.fail_time = t
        sc.context(
            None,
            t - 1,
            f"{sc.when(t):%b %d %H:%M:%S} {sc.host(0)} systemd[1]: Starting NVIDIA fabric manager service...",
            node=node,
        )
        sc.root(
            None,
            t - 0.5,
            f"{sc.when(t):%b %d %H:%M:%S} {sc.host(0)} nv-fabricmanager[{rng.randint(900, 9000)}]: fabric manager NVLink training failed, the system is not ready for CUDA workloads",
            node=node,
        )
        warn = f"{sc.env.sp('torch/cuda/__init__.py')}:129: UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)\n  return torch._C._cuda_getDeviceCount() > 0"
        for r in sc.visible[:8]:
            sc.symptom(r, t + sc.jitter(1.0), warn)
        sc.symptom(
            sc.visible[0],
            t + 1.5,
            traceback(
                sc,
                script_frames(sc, ("sp:torch/cuda/__init__.py", 302, "_lazy_init", "torch._C._cuda_init()")),
                "RuntimeError: CUDA error: system not yet initialized",
            ),
        )
        teardown(sc, t + 3, [(r, 1) for r in sc.visible[:4]])
        return
    t = rng.uniform(300, 100000)
    sc.fail_time = t
    if v == "xid74":
        sc.root(
            None,
            t - 0.3,
            _dmesg(
                sc,
                f"NVRM: Xid (PCI:{pci}): 74, pid={sc.pid(init)}, name=python3, NVLink: fatal error detected on link {rng.randint(0, 17)}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
            ),
            node=node,
        )
        text = _watchdog_cuda(
            sc, init, t, rng.choice(("unspecified launch failure", "an illegal memory access was encountered"))
        )
    elif v == "xid145-45":
        lines = [
            _dmesg(sc, f"NVRM: Xid (PCI:{pci}): {rng.choice((145, 149))}, NVLink: RLW error, link {rng.randint(0, 17)}")
        ]
        lines += [
            _dmesg(
                sc,
                f"NVRM: Xid (PCI:{_PCI[i % 8]}): 45, pid={sc.pid(init) + i}, name=python3, Ch 0000000{i % 9} caused by previous Xid 145",
            )
            for i in range(rng.randint(2, 5))
        ]
        sc.root(None, t - 0.3, "\n".join(lines), node=node)
        text = _watchdog_cuda(sc, init, t, "unspecified launch failure")
    else:
        text = f"{nccl_prefix(sc, init)} transport/nvls.cc:254 NCCL WARN Cuda failure 401 'the operation cannot be performed in the present state'\n{nccl_prefix(sc, init)} NCCL INFO transport/nvls.cc:409 -> 1"
        sc.context(
            None,
            t - 0.2,
            f"    Fabric\n        State                             : Completed\n        Status                            : {rng.choice(('Failure', 'N/A'))}",
            node=node,
        )
    crash_with_fallout(sc, t, text, exitcode=-6)


RECIPES = (
    Recipe(
        "gpu-xid-ecc-error",
        "hardware",
        _ecc,
        ("NVRM: Xid (PCI:0000:18:00): 48, pid=1234, name=python3, DBE (double bit error) ECC error",),
    ),
    Recipe(
        "gpu-fallen-off-bus",
        "hardware",
        _fallen_off,
        ("NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",),
    ),
    Recipe("cuda-illegal-memory-access", "hardware", _illegal_access),
    Recipe("cuda-driver-mismatch", "hardware", _driver),
    Recipe(
        "nvlink-xid74-fabric-manager",
        "hardware",
        _nvlink,
        ("NVRM: Xid (PCI:0000:18:00): 74, pid=1234, name=python3, NVLink: fatal error detected on link 3",),
    ),
)
