"""Computes the expected outputs of Concord's op cases (conformance/cases/*.toml) with onnxruntime.

Run it through `cargo xtask op-oracle`, which first writes every case's model and inputs with
the suite's own builder (conformance/examples/op_oracle_export.rs) into a work directory:
<work>/index.json lists the cases, <work>/<op>/<case>/model.onnx and inputs/<name>.npy hold
each one exactly as the suite runs it. This script runs each model once and writes
<out>/<op>/<case>/<output>.npy and <out>/manifest.json (the oracles' versions, and per case
the digest of what was run, which oracle ran it and, if not onnxruntime, why).

The oracle is onnxruntime's CPUExecutionProvider with graph optimisations off and one
thread. A case may name another oracle in its `oracle` field, with a reason:
- `onnx-reference`: the ONNX specification's reference implementation (onnx.reference),
  where onnxruntime departs from the specification, refuses a form it defines or has no
  kernel for the case's type;
- `numpy`: the op written out from its ONNX definition with numpy below (NUMPY_OPS), where
  onnxruntime and onnx.reference both depart from the convention the case documents.
A case onnxruntime cannot run and that names no other oracle stops the run with
onnxruntime's message. The output is deterministic: the manifest is written with sorted keys
and the .npy files by numpy.

`--compare` also runs onnx.reference on every case and prints where the two oracles differ
(beyond 1e-6 relative), to find cases whose choice of oracle needs a decision.
"""

import argparse
import json
import platform
import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort


def ort_session(model_bytes):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def run_ort(model_bytes, feeds):
    return ort_session(model_bytes).run(None, feeds)


def run_reference(model_bytes, feeds):
    from onnx.reference import ReferenceEvaluator

    model = onnx.load_from_string(model_bytes)
    return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)]


def numpy_max_pool(node, x):
    """MaxPool from its ONNX definition (explicit pads, no dilation, floor mode) with numpy's
    max, which propagates NaN: each output is the IEEE maximum of its window."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    unsupported = set(attrs) - {"kernel_shape", "strides", "pads"}
    if unsupported:
        raise ValueError(f"the numpy MaxPool oracle does not take {sorted(unsupported)}")
    kernel = list(attrs["kernel_shape"])
    rank = len(kernel)
    strides = list(attrs.get("strides", [1] * rank))
    pads = list(attrs.get("pads", [0] * (2 * rank)))
    widths = [(0, 0), (0, 0)] + [(pads[i], pads[i + rank]) for i in range(rank)]
    padded = np.pad(x, widths, constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, kernel, axis=tuple(range(2, 2 + rank)))
    index = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)
    return np.max(windows[index], axis=tuple(range(-rank, 0))).astype(x.dtype)


# Ops the `numpy` oracle computes, by op type: f(node, *inputs) -> outputs.
NUMPY_OPS = {"MaxPool": lambda node, x: [numpy_max_pool(node, x)]}


def run_numpy(model_bytes, feeds):
    graph = onnx.load_from_string(model_bytes).graph
    (node,) = graph.node
    if node.op_type not in NUMPY_OPS:
        raise ValueError(f"the numpy oracle has no {node.op_type} (it has {sorted(NUMPY_OPS)})")
    return NUMPY_OPS[node.op_type](node, *[feeds[name] for name in node.input])


ORACLES = {
    "onnxruntime": run_ort,
    "onnx-reference": run_reference,
    "numpy": run_numpy,
}


def differs(a, b):
    """Where two oracles' outputs differ beyond 1e-6 relative (a description, or None)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
    if a.dtype.kind in "fc":
        x, y = a.astype(np.float64), b.astype(np.float64)
        same_nan = np.isnan(x) == np.isnan(y)
        with np.errstate(invalid="ignore"):
            close = np.isclose(x, y, rtol=1e-6, atol=1e-7, equal_nan=True) | (x == y)
        bad = ~(close & same_nan)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return f"{int(bad.sum())} elements, first at {i}: {x.flat[i]!r} vs {y.flat[i]!r}"
        return None
    bad = a != b
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        return f"{int(bad.sum())} elements, first at {i}: {a.flat[i]!r} vs {b.flat[i]!r}"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--compare", action="store_true")
    args = parser.parse_args()

    index = json.loads((args.work / "index.json").read_text())
    # Everything under <out> but hand-written files is the generator's: start clean so a
    # removed case leaves no file behind.
    if args.out.exists():
        for child in args.out.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
            elif child.name == "manifest.json":
                child.unlink()
    args.out.mkdir(parents=True, exist_ok=True)

    cases = {}
    failures = []
    differences = []
    for entry in index:
        key = entry["key"]
        case_dir = args.work / entry["dir"]
        model_bytes = (case_dir / "model.onnx").read_bytes()
        feeds = {name: np.load(case_dir / "inputs" / f"{name}.npy") for name in entry["inputs"]}
        choice = entry.get("oracle")
        oracle = choice["follow"] if choice else "onnxruntime"
        try:
            outputs = ORACLES[oracle](model_bytes, feeds)
        except Exception as error:  # noqa: BLE001 - every oracle failure is reported by case
            first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            failures.append(f"{key}: {oracle} failed: {first}")
            continue
        if len(outputs) != len(entry["outputs"]):
            failures.append(f"{key}: {oracle} gave {len(outputs)} outputs, the case has {len(entry['outputs'])}")
            continue
        if args.compare:
            try:
                spec = run_reference(model_bytes, feeds) if oracle != "onnx-reference" else outputs
                for name, a, b in zip(entry["outputs"], outputs, spec):
                    d = differs(a, b)
                    if d:
                        differences.append(f"{key} {name}: {oracle} vs onnx-reference: {d}")
            except Exception as error:  # noqa: BLE001
                first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
                differences.append(f"{key}: onnx-reference failed: {first}")
        written = {}
        for name, value in zip(entry["outputs"], outputs):
            relative = f"{entry['dir']}/{name}.npy"
            path = args.out / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, np.array(value, order="C", copy=True), allow_pickle=False)
            written[name] = relative
        record = {"digest": entry["digest"], "oracle": oracle, "outputs": written}
        if choice:
            record["reason"] = choice["reason"]
        cases[key] = record

    for line in differences:
        print(f"op_oracle: differs: {line}")
    if failures:
        print(f"op_oracle: {len(failures)} case(s) have no oracle output:", file=sys.stderr)
        for line in failures:
            print(f"  {line}", file=sys.stderr)
        print(
            "give each an `oracle = { follow = \"onnx-reference\" | \"numpy\", reason = \"…\" }` "
            "saying why onnxruntime cannot be its oracle, or fix the case",
            file=sys.stderr,
        )
        sys.exit(1)

    manifest = {
        "oracle": {
            "onnxruntime": ort.__version__,
            "onnx": onnx.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "execution_provider": "CPUExecutionProvider",
            "graph_optimization_level": "ORT_DISABLE_ALL",
            "intra_op_num_threads": "1",
            "generator": "xtask/golden/op_oracle.py (cargo xtask op-oracle)",
        },
        "cases": cases,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    by_oracle = {}
    for record in cases.values():
        by_oracle[record["oracle"]] = by_oracle.get(record["oracle"], 0) + 1
    print(f"op_oracle: {len(cases)} cases written to {args.out}: {by_oracle}")


if __name__ == "__main__":
    main()
