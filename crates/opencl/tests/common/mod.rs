//! Helpers shared by the OpenCL executor's tests: whether OpenCL is here (and whether it
//! must be), one shared registry so programs compile once per test binary, the golden
//! manifest with its tolerance comparison, and small models built with the core API.

#![allow(dead_code)]

use concord::core::op::{Conv, Gemm, Pool};
use concord::core::{Node, Op, TensorData};
use concord::{
    Availability, DType, Executor, ExecutorRegistry, FallbackCause, Graph, Tensor, ValueInfo,
};
use concord_opencl::OpenClExecutor;
use npyz::half::f16;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// What the OpenCL probe found for this test binary.
#[derive(Debug, Clone)]
pub enum OpenClHere {
    Available,
    /// Not here; `cause` and `reason` are the probe's.
    Unavailable {
        cause: FallbackCause,
        reason: String,
    },
}

/// True when `CONCORD_REQUIRE` names opencl: then an unavailable OpenCL fails the test
/// instead of being checked as a fallback (CI sets it, so CI cannot pass on the CPU).
pub fn opencl_required() -> bool {
    std::env::var("CONCORD_REQUIRE")
        .map(|v| {
            v.split(',')
                .any(|e| e.trim().eq_ignore_ascii_case("opencl"))
        })
        .unwrap_or(false)
}

/// One OpenCL executor for the whole test binary, so kernels are compiled once.
pub fn shared_executor() -> Arc<OpenClExecutor> {
    static EXECUTOR: OnceLock<Arc<OpenClExecutor>> = OnceLock::new();
    EXECUTOR
        .get_or_init(|| Arc::new(OpenClExecutor::new()))
        .clone()
}

/// A registry holding the shared executor (clones share it: executors are `Arc`s).
pub fn shared_registry() -> ExecutorRegistry {
    ExecutorRegistry::with_builtins().with(shared_executor())
}

/// Probes once and, when OpenCL is missing, says so on stdout (or panics when it is
/// required). Tests branch on the answer and assert the fallback in the missing case.
pub fn opencl_here(test: &str) -> OpenClHere {
    match shared_executor().probe() {
        Availability::Available { devices } => {
            let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
            println!("{test}: OpenCL available ({})", names.join(", "));
            OpenClHere::Available
        }
        Availability::Unavailable { cause, reason } => {
            assert!(
                !opencl_required(),
                "{test}: CONCORD_REQUIRE names opencl but the OpenCL executor is \
                 unavailable ({cause:?}): {reason}"
            );
            println!(
                "{test}: the OpenCL executor is unavailable ({cause:?}: {reason}); checking \
                 that it falls back to the reference and says so instead"
            );
            OpenClHere::Unavailable { cause, reason }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Golden cases.

#[derive(Debug, Deserialize)]
pub struct Manifest {
    pub tolerances: BTreeMap<String, Tolerance>,
    pub cases: Vec<Case>,
}

/// A named tolerance level: an element passes when |actual - expected| <= abs + rel·|expected|.
#[derive(Debug, Deserialize, Clone)]
pub struct Tolerance {
    pub abs: f64,
    pub rel: f64,
    pub reason: String,
}

#[derive(Debug, Deserialize)]
pub struct Case {
    pub name: String,
    pub op_types: Vec<String>,
    pub model: String,
    pub inputs: BTreeMap<String, String>,
    pub outputs: BTreeMap<String, String>,
    pub tolerance: String,
}

pub fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../golden")
}

pub fn load_manifest() -> Manifest {
    let path = golden_dir().join("manifest.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a valid manifest: {e}", path.display()))
}

/// The inputs of a case, read from its .npy files.
pub fn case_inputs(case: &Case) -> Result<Vec<(String, Tensor)>, String> {
    let root = golden_dir();
    case.inputs
        .iter()
        .map(|(name, file)| Ok((name.clone(), read_npy(&root.join(file))?)))
        .collect()
}

/// Compares dtype, shape, then every element within the tolerance (NaN meets NaN,
/// infinities must be equal, integers and bools exactly).
pub fn compare(actual: &Tensor, expected: &Tensor, tolerance: &Tolerance) -> Result<(), String> {
    if actual.dtype() != expected.dtype() {
        return Err(format!(
            "dtype {} but expected {}",
            actual.dtype(),
            expected.dtype()
        ));
    }
    if actual.dims() != expected.dims() {
        return Err(format!(
            "shape {:?} but expected {:?}",
            actual.dims(),
            expected.dims()
        ));
    }
    let pairs: Vec<(f64, f64)> = actual
        .to_f64_vec()
        .into_iter()
        .zip(expected.to_f64_vec())
        .collect();
    let exact = matches!(expected.data(), TensorData::I64(_) | TensorData::Bool(_));
    let mut failing = 0;
    let mut worst: Option<(usize, f64)> = None;
    let mut max_abs = 0.0f64;
    for (i, &(a, e)) in pairs.iter().enumerate() {
        let ok = if a.is_nan() || e.is_nan() || a.is_infinite() || e.is_infinite() {
            (a.is_nan() && e.is_nan()) || a == e
        } else if exact {
            a == e
        } else {
            let err = (a - e).abs();
            max_abs = max_abs.max(err);
            err <= tolerance.abs + tolerance.rel * e.abs()
        };
        if !ok {
            failing += 1;
            let err = if a.is_finite() && e.is_finite() {
                (a - e).abs()
            } else {
                f64::INFINITY
            };
            if worst.map_or(true, |(_, w)| err > w) {
                worst = Some((i, err));
            }
        }
    }
    if failing == 0 {
        return Ok(());
    }
    let mut message = format!(
        "{failing} of {} elements out of tolerance (abs {:e}, rel {:e}); max abs error {max_abs:e}",
        pairs.len(),
        tolerance.abs,
        tolerance.rel
    );
    if let Some((i, _)) = worst {
        let _ = write!(
            message,
            "; worst at flat index {i}: got {}, expected {}",
            pairs[i].0, pairs[i].1
        );
    }
    Err(message)
}

/// Reads a C-order .npy file of f32, f16, i64 or bool into a tensor.
pub fn read_npy(path: &Path) -> Result<Tensor, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..])
        .map_err(|e| format!("{} is not .npy: {e}", path.display()))?;
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let descr = match npy.dtype() {
        npyz::DType::Plain(type_str) => type_str.to_string(),
        other => {
            return Err(format!(
                "{}: unsupported dtype {}",
                path.display(),
                other.descr()
            ))
        }
    };
    let read_err = |e: std::io::Error| format!("reading data of {}: {e}", path.display());
    let tensor = match descr.as_str() {
        "<f4" => Tensor::from_f32(shape, npy.into_vec::<f32>().map_err(read_err)?),
        "<f2" => Tensor::from_f16(shape, npy.into_vec::<f16>().map_err(read_err)?),
        "<i8" => Tensor::from_i64(shape, npy.into_vec::<i64>().map_err(read_err)?),
        "|b1" => Tensor::from_bool(shape, npy.into_vec::<bool>().map_err(read_err)?),
        other => {
            return Err(format!(
                "{}: dtype {other} is not supported",
                path.display()
            ))
        }
    };
    tensor.map_err(|e| format!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------
// Models built with the core API.

/// Deterministic pseudo-random values in [-scale, scale].
pub struct Lcg(u64);

impl Lcg {
    pub fn new(seed: u64) -> Self {
        Lcg(seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407))
    }

    pub fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    pub fn tensor(&mut self, dims: &[usize], scale: f32) -> Tensor {
        let n: usize = dims.iter().product();
        let data = (0..n).map(|_| self.next() * scale).collect();
        Tensor::from_f32(dims.to_vec(), data).expect("dims match data")
    }
}

/// Builds a CNN graph node by node, naming values v0, v1, ….
pub struct CnnBuilder {
    pub graph: Graph,
    rng: Lcg,
    next: usize,
}

impl CnnBuilder {
    pub fn new(name: &str, input: &[usize], seed: u64) -> Self {
        CnnBuilder {
            graph: Graph {
                name: name.into(),
                inputs: vec![ValueInfo::fixed("input", DType::F32, input)],
                opset: 17,
                ..Graph::default()
            },
            rng: Lcg::new(seed),
            next: 0,
        }
    }

    fn value(&mut self) -> String {
        self.next += 1;
        format!("v{}", self.next)
    }

    fn weight(&mut self, dims: &[usize], scale: f32) -> String {
        let name = format!("w{}", self.graph.initializers.len());
        let t = self.rng.tensor(dims, scale);
        self.graph.initializers.insert(name.clone(), t);
        name
    }

    /// Conv (with bias) → BatchNormalization, as an unfolded PyTorch export has it.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_bn(
        &mut self,
        x: &str,
        cin: usize,
        cout: usize,
        k: usize,
        stride: usize,
        group: usize,
    ) -> String {
        let fan_in = (cin / group * k * k) as f32;
        let w = self.weight(&[cout, cin / group, k, k], (2.0 / fan_in).sqrt());
        let b = self.weight(&[cout], 0.1);
        let c = self.value();
        let pad = k / 2;
        let conv = Conv {
            group,
            kernel_shape: vec![k, k],
            pads: vec![pad; 4],
            strides: vec![stride, stride],
            ..Conv::default()
        };
        let name = format!("conv{}", self.next);
        self.graph
            .nodes
            .push(Node::new(&name, Op::Conv(conv), &[x, &w, &b], &[&c]));
        let scale = self.positive(cout, 0.5, 1.5);
        let shift = self.weight(&[cout], 0.1);
        let mean = self.weight(&[cout], 0.1);
        let var = self.positive(cout, 0.5, 1.5);
        let y = self.value();
        let name = format!("bn{}", self.next);
        self.graph.nodes.push(Node::new(
            &name,
            Op::BatchNormalization { epsilon: 1e-5 },
            &[&c, &scale, &shift, &mean, &var],
            &[&y],
        ));
        y
    }

    fn positive(&mut self, n: usize, lo: f32, hi: f32) -> String {
        let name = format!("w{}", self.graph.initializers.len());
        let data = (0..n)
            .map(|_| lo + (self.rng.next() + 1.0) / 2.0 * (hi - lo))
            .collect();
        self.graph
            .initializers
            .insert(name.clone(), Tensor::from_f32([n], data).expect("n values"));
        name
    }

    pub fn unary(&mut self, op: Op, x: &str) -> String {
        let y = self.value();
        let name = format!("{}{}", op.name().to_lowercase(), self.next);
        self.graph.nodes.push(Node::new(&name, op, &[x], &[&y]));
        y
    }

    pub fn relu6(&mut self, x: &str) -> String {
        if !self.graph.initializers.contains_key("zero") {
            self.graph
                .initializers
                .insert("zero".into(), Tensor::scalar_f32(0.0));
            self.graph
                .initializers
                .insert("six".into(), Tensor::scalar_f32(6.0));
        }
        let y = self.value();
        let name = format!("clip{}", self.next);
        self.graph
            .nodes
            .push(Node::new(&name, Op::Clip, &[x, "zero", "six"], &[&y]));
        y
    }

    pub fn add(&mut self, a: &str, b: &str) -> String {
        let y = self.value();
        let name = format!("add{}", self.next);
        self.graph
            .nodes
            .push(Node::new(&name, Op::Add, &[a, b], &[&y]));
        y
    }

    pub fn max_pool(&mut self, x: &str, k: usize, stride: usize, pad: usize) -> String {
        let y = self.value();
        let pool = Pool {
            kernel_shape: vec![k, k],
            strides: vec![stride, stride],
            pads: vec![pad; 4],
            ..Pool::default()
        };
        let name = format!("maxpool{}", self.next);
        self.graph
            .nodes
            .push(Node::new(&name, Op::MaxPool(pool), &[x], &[&y]));
        y
    }

    /// GlobalAveragePool → Flatten → Gemm(classes) as the graph output `output`.
    pub fn head(&mut self, x: &str, channels: usize, classes: usize) {
        let p = self.unary(Op::GlobalAveragePool, x);
        let f = self.unary(Op::Flatten { axis: 1 }, &p);
        let w = self.weight(&[classes, channels], (1.0 / channels as f32).sqrt());
        let b = self.weight(&[classes], 0.1);
        let gemm = Gemm {
            trans_b: true,
            ..Gemm::default()
        };
        self.graph
            .nodes
            .push(Node::new("fc", Op::Gemm(gemm), &[&f, &w, &b], &["output"]));
        self.graph.outputs.push("output".into());
    }
}

/// A ResNet-18-shaped network (stem, four stages of two basic blocks, head) at `size`²
/// input, with `width` channels in the first stage.
pub fn resnet18_like(size: usize, width: usize, classes: usize) -> Graph {
    let mut b = CnnBuilder::new("resnet18_like", &[1, 3, size, size], 18);
    let stem = b.conv_bn("input", 3, width, 7, 2, 1);
    let stem = b.unary(Op::Relu, &stem);
    let mut x = b.max_pool(&stem, 3, 2, 1);
    let mut cin = width;
    for stage in 0..4 {
        let cout = width << stage;
        for block in 0..2 {
            let stride = if stage > 0 && block == 0 { 2 } else { 1 };
            let h = b.conv_bn(&x, cin, cout, 3, stride, 1);
            let h = b.unary(Op::Relu, &h);
            let h = b.conv_bn(&h, cout, cout, 3, 1, 1);
            let skip = if stride != 1 || cin != cout {
                b.conv_bn(&x, cin, cout, 1, stride, 1)
            } else {
                x.clone()
            };
            let sum = b.add(&h, &skip);
            x = b.unary(Op::Relu, &sum);
            cin = cout;
        }
    }
    b.head(&x, cin, classes);
    b.graph
}

/// A MobileNetV2-shaped network: stem, inverted residual blocks (1×1 expand, 3×3
/// depthwise, 1×1 project, skip where shapes allow) with ReLU6 as Clip, head.
pub fn mobilenet_v2_like(size: usize, width_mult: f32, classes: usize) -> Graph {
    let mut b = CnnBuilder::new("mobilenet_v2_like", &[1, 3, size, size], 2);
    let ch = |c: usize| ((c as f32 * width_mult) as usize).max(8);
    let stem = b.conv_bn("input", 3, ch(32), 3, 2, 1);
    let mut x = b.relu6(&stem);
    let mut cin = ch(32);
    // (expansion, channels, repeats, stride), as in the MobileNetV2 paper.
    let settings = [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ];
    for (t, c, n, s) in settings {
        let cout = ch(c);
        for i in 0..n {
            let stride = if i == 0 { s } else { 1 };
            let hidden = cin * t;
            let mut h = x.clone();
            if t != 1 {
                let e = b.conv_bn(&h, cin, hidden, 1, 1, 1);
                h = b.relu6(&e);
            }
            let d = b.conv_bn(&h, hidden, hidden, 3, stride, hidden);
            let d = b.relu6(&d);
            let p = b.conv_bn(&d, hidden, cout, 1, 1, 1);
            x = if stride == 1 && cin == cout {
                b.add(&p, &x)
            } else {
                p
            };
            cin = cout;
        }
    }
    let last = b.conv_bn(&x, cin, 1280, 1, 1, 1);
    let last = b.relu6(&last);
    b.head(&last, 1280, classes);
    b.graph
}

/// A deterministic input image.
pub fn image(size: usize, seed: u64) -> Tensor {
    Lcg::new(seed).tensor(&[1, 3, size, size], 1.0)
}
