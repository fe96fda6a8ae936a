//! What one OpenCL command costs on this machine's first device, apart from its kernel's
//! work: `cargo run --release -p concord-opencl --example command_cost` (with
//! `POCL_DEVICES=basic` for PoCL's one-core device). docs/opencl-speed.md quotes it
//! for PoCL's `pthread` device, where a forward of many small kernels pays this per command.
//! It prints, as medians:
//! - the time per kernel of a chain of 40 tiny kernels, enqueued back to back and then
//!   waited for, for a kernel of 2 arguments and one of 16 (each argument is copied at
//!   enqueue and set up and freed by the device's worker threads);
//! - the time from enqueueing one kernel of 16 work-groups to clFinish returning, for
//!   kernels of increasing work: on `pthread` the fixed part is the worker threads' wake-up,
//!   and whether a kernel gets faster on two threads shows whether the second arrives in
//!   time to take its half.

// A measuring tool, not library code: a failure ends it with the message. It calls OpenCL
// directly (as the executor's cl.rs does), each unsafe block with its SAFETY comment.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used, unsafe_code)]

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{get_all_devices, Device, CL_DEVICE_TYPE_ALL};
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::cl_float;
use std::time::Instant;

const SOURCE: &str = r#"
__kernel void two(__global float* a, int n) {
    int i = get_global_id(0);
    if (i < n) a[i] += 1.0f;
}
__kernel void sixteen(__global float* a, __global float* b, __global float* c, int n, int8 p,
                      int m, int8 q, float x, float y, __global float* d, int h, int act,
                      float aa, float bb, int k, int8 r) {
    int i = get_global_id(0);
    if (i < n) a[i] += 1.0f;
}
__kernel void work(__global float* a, int iters) {
    int i = get_global_id(0);
    float x = a[i];
    for (int k = 0; k < iters; ++k) x = fma(x, 0.999f, 0.001f);
    a[i] = x;
}
"#;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn enqueue(queue: &CommandQueue, kernel: &Kernel, items: usize) {
    let (global, local) = ([items], [64usize]);
    // SAFETY: every argument of the kernel is set, and the sizes live across the call.
    unsafe {
        queue
            .enqueue_nd_range_kernel(
                kernel.get(),
                1,
                std::ptr::null(),
                global.as_ptr(),
                local.as_ptr(),
                &[],
            )
            .expect("enqueue");
    }
}

fn main() {
    let ids = get_all_devices(CL_DEVICE_TYPE_ALL).expect("an OpenCL platform");
    let device = Device::new(*ids.first().expect("an OpenCL device"));
    println!("device: {}", device.name().unwrap_or_default());
    let context = Context::from_device(&device).unwrap();
    let queue = CommandQueue::create_default_with_properties(&context, 0, 0).unwrap();
    let program = Program::create_and_build_from_source(&context, SOURCE, "").unwrap();
    // SAFETY: a plain read-write buffer with no host pointer.
    let buffer = unsafe {
        Buffer::<cl_float>::create(&context, CL_MEM_READ_WRITE, 4096, std::ptr::null_mut())
    }
    .unwrap();
    let (n, int8, one) = (64i32, [0i32; 8], 1.0f32);
    let two = Kernel::create(&program, "two").unwrap();
    let sixteen = Kernel::create(&program, "sixteen").unwrap();
    // SAFETY: each argument matches the kernel's parameter of that index.
    unsafe {
        two.set_arg(0, &buffer).unwrap();
        two.set_arg(1, &n).unwrap();
        for i in [0, 1, 2, 9] {
            sixteen.set_arg(i, &buffer).unwrap();
        }
        for i in [3, 5, 10, 11, 14] {
            sixteen.set_arg(i, &n).unwrap();
        }
        for i in [4, 6, 15] {
            sixteen.set_arg(i, &int8).unwrap();
        }
        for i in [7, 8, 12, 13] {
            sixteen.set_arg(i, &one).unwrap();
        }
    }
    let chain = 40;
    for round in 1..=2 {
        for (name, kernel) in [("2 arguments", &two), ("16 arguments", &sixteen)] {
            let per_kernel: Vec<f64> = (0..300)
                .map(|_| {
                    let start = Instant::now();
                    for _ in 0..chain {
                        enqueue(&queue, kernel, 64);
                    }
                    queue.finish().unwrap();
                    start.elapsed().as_secs_f64() * 1e6 / chain as f64
                })
                .collect();
            println!(
                "round {round}: a chain of {chain} tiny kernels of {name}: {:.2} µs per kernel",
                median(per_kernel)
            );
        }
    }
    let work = Kernel::create(&program, "work").unwrap();
    for iters in [20i32, 200, 2000] {
        // SAFETY: as above.
        unsafe {
            work.set_arg(0, &buffer).unwrap();
            work.set_arg(1, &iters).unwrap();
        }
        let round_trip: Vec<f64> = (0..40)
            .map(|_| {
                let start = Instant::now();
                enqueue(&queue, &work, 16 * 64);
                queue.finish().unwrap();
                start.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        println!(
            "one kernel of 16 work-groups, {iters} multiply-adds per item: {:.1} µs from \
             enqueue to clFinish's return",
            median(round_trip)
        );
    }
}
