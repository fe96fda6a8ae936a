//! Benchmark and test models built with the core API: a ResNet-18-shaped and a
//! MobileNetV2-shaped CNN (Conv with bias → BatchNormalization, as an unfolded PyTorch
//! export has them; Relu, or ReLU6 as Clip; Add; MaxPool; GlobalAveragePool → Flatten →
//! Gemm), with deterministic weights, so every executor's benches and tests run the same
//! models with no files. `with_batch` sets the batch size (the graphs are batch-agnostic).

use concord_core::op::{Binary, Unary};
use concord_core::op::{Conv, Gemm, Pool};
use concord_core::{DType, Graph, Node, Op, Tensor, ValueInfo};

/// Deterministic pseudo-random values in [-scale, scale].
#[derive(Debug, Clone)]
pub struct Lcg(u64);

impl Lcg {
    pub fn new(seed: u64) -> Self {
        Lcg(seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407))
    }

    pub fn next_value(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    pub fn tensor(&mut self, dims: &[usize], scale: f32) -> Tensor {
        let n: usize = dims.iter().product();
        let data = (0..n).map(|_| self.next_value() * scale).collect();
        Tensor::from_f32(dims.to_vec(), data).expect("dims match data")
    }
}

/// Builds a CNN graph node by node, naming values v0, v1, ….
#[derive(Debug)]
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
            .map(|_| lo + (self.rng.next_value() + 1.0) / 2.0 * (hi - lo))
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
            .push(Node::new(&name, Op::Binary(Binary::Add), &[a, b], &[&y]));
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
    let stem = b.unary(Op::Unary(Unary::Relu), &stem);
    let mut x = b.max_pool(&stem, 3, 2, 1);
    let mut cin = width;
    for stage in 0..4 {
        let cout = width << stage;
        for block in 0..2 {
            let stride = if stage > 0 && block == 0 { 2 } else { 1 };
            let h = b.conv_bn(&x, cin, cout, 3, stride, 1);
            let h = b.unary(Op::Unary(Unary::Relu), &h);
            let h = b.conv_bn(&h, cout, cout, 3, 1, 1);
            let skip = if stride != 1 || cin != cout {
                b.conv_bn(&x, cin, cout, 1, stride, 1)
            } else {
                x.clone()
            };
            let sum = b.add(&h, &skip);
            x = b.unary(Op::Unary(Unary::Relu), &sum);
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

/// `graph` with its single input's batch dimension (the first) set to `batch`.
pub fn with_batch(mut graph: Graph, batch: usize) -> Graph {
    if let Some(input) = graph.inputs.first_mut() {
        let mut dims: Vec<usize> = input
            .shape
            .iter()
            .map(|d| match d {
                concord_core::Dim::Fixed(n) => *n,
                _ => 1,
            })
            .collect();
        if let Some(first) = dims.first_mut() {
            *first = batch;
        }
        *input = ValueInfo::fixed(input.name.clone(), input.dtype, &dims);
    }
    graph
}

/// A deterministic batch of `batch` input images.
pub fn images(batch: usize, size: usize, seed: u64) -> Tensor {
    Lcg::new(seed).tensor(&[batch, 3, size, size], 1.0)
}
