"""Times onnxruntime (CPU execution provider) on one model for the `models` bench.

Usage: ort_timer.py MODEL.onnx THREADS NAME=INPUT.npy [NAME=INPUT.npy ...]

Loads the model once with THREADS intra-op threads (the bench passes the thread count
Concord's OpenCL executor runs on), warms up, then reads iteration counts from stdin, one
per line; for each it runs that many forward passes and prints the elapsed nanoseconds on
one line. The bench asks for one round at a time, interleaved with the rounds of Concord's
executors, so load from other processes on the machine falls on all of them alike.
onnxruntime runs with full graph optimisation (it folds BatchNormalization into Conv, as
Concord's OpenCL executor fuses them).
"""

import sys
import time

import numpy as np
import onnxruntime as ort


def main() -> None:
    model, threads = sys.argv[1], int(sys.argv[2])
    feed = {}
    for pair in sys.argv[3:]:
        name, path = pair.split("=", 1)
        feed[name] = np.load(path)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        model, sess_options=options, providers=["CPUExecutionProvider"]
    )
    for _ in range(3):
        session.run(None, feed)
    print(f"ready onnxruntime {ort.__version__}, {threads} threads", flush=True)
    for line in sys.stdin:
        iterations = int(line)
        start = time.perf_counter_ns()
        for _ in range(iterations):
            session.run(None, feed)
        print(time.perf_counter_ns() - start, flush=True)


if __name__ == "__main__":
    main()
