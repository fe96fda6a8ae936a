"""Writes the ONNX backend node tests of the installed onnx into a directory.

onnx 1.23 no longer writes node tests with `onnx.backend.test.cmd_tools generate-data`,
but it still ships the case generators; this script runs them and stores each case in the
layout the ONNX node-test data has always had, which conformance/src/node_tests.rs reads:

    OUT/<test name>/model.onnx
    OUT/<test name>/test_data_set_<i>/input_<j>.pb, output_<j>.pb   (TensorProto)

Usage: python generate.py OUT   (OUT must exist and be empty). Run by
`cargo xtask onnx-node-tests`, which pins the onnx release in requirements.txt beside it.
"""

import os
import sys

from onnx import TensorProto, numpy_helper
from onnx.backend.test.case import node as node_cases


def serialise(value, value_info) -> bytes:
    """One input or output value as the protobuf its graph's value_info calls for."""
    kind = value_info.type.WhichOneof("value")
    name = value_info.name
    if kind == "tensor_type":
        if isinstance(value, TensorProto):
            return value.SerializeToString()
        return numpy_helper.from_array(value, name).SerializeToString()
    if kind == "sequence_type":
        return numpy_helper.from_list(value, name).SerializeToString()
    if kind == "optional_type":
        return numpy_helper.from_optional(value, name).SerializeToString()
    if kind == "map_type":
        return numpy_helper.from_dict(value, name).SerializeToString()
    raise ValueError(f"value {name!r} has a type of kind {kind!r} that no test uses")


def write_case(out: str, case) -> None:
    case_dir = os.path.join(out, case.name)
    os.makedirs(case_dir)
    with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    graph = case.model.graph
    for i, (inputs, outputs) in enumerate(case.data_sets):
        set_dir = os.path.join(case_dir, f"test_data_set_{i}")
        os.makedirs(set_dir)
        for prefix, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
            for j, value in enumerate(values):
                with open(os.path.join(set_dir, f"{prefix}_{j}.pb"), "wb") as f:
                    f.write(serialise(value, infos[j]))


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    if not os.path.isdir(out) or os.listdir(out):
        print(f"{out} must be an existing, empty directory", file=sys.stderr)
        return 2
    cases = node_cases.collect_testcases(None)
    names = [case.name for case in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        print(f"the generators name several cases alike: {duplicates}", file=sys.stderr)
        return 1
    for case in cases:
        if case.model is None or not case.data_sets:
            print(f"case {case.name} has no model or no data set", file=sys.stderr)
            return 1
        write_case(out, case)
    print(f"wrote {len(cases)} node tests to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
