"""Times onnxruntime (CPU execution provider) on one model for the `models` bench.

Usage: ort_timer.py MODEL.onnx INPUT.npy

Loads the model once, then reads iteration counts from stdin, one per line; for each it
runs that many forward passes and prints the elapsed nanoseconds on one line. The bench
drives it through criterion's iter_custom, so onnxruntime's median is measured by the
same statistics, in the same run, as Concord's executors. onnxruntime uses its default
thread pool (one thread per core) and full graph optimisation (it folds
BatchNormalization into Conv, as Concord's OpenCL executor fuses them).
"""

import sys
import time

import numpy as np
import onnxruntime as ort


def main() -> None:
    model, input_path = sys.argv[1], sys.argv[2]
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    feed = {name: np.load(input_path)}
    session.run(None, feed)
    print(f"ready onnxruntime {ort.__version__}", flush=True)
    for line in sys.stdin:
        iterations = int(line)
        start = time.perf_counter_ns()
        for _ in range(iterations):
            session.run(None, feed)
        print(time.perf_counter_ns() - start, flush=True)


if __name__ == "__main__":
    main()
