//! Whole CNNs and single layers on OpenCL against the reference executor, at the suite's
//! `model` tolerance level. The shapes are chosen for the CPU-device kernels' paths: rows
//! wider than one 16-lane vector and ragged ones (a full chunk plus a partial one), strides
//! 1 and 2, dilation, the 7×7 stem, MaxPool with and without ceil_mode, residual epilogues,
//! and the f16-storage build of every kernel involved (an f16 model runs f16 storage on
//! the OpenCL target). The golden cases and the suite's generated cases are small; these
//! are the sizes the benchmarks run.
//!
//! Without an OpenCL runtime the nets fall back and the comparison is trivially the
//! reference's; the test then checks the fallback was announced (unless CONCORD_REQUIRE
//! names opencl, when it fails).

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

mod common;

use common::{opencl_here, CnnBuilder, Lcg, OpenClHere};
use concord::executor::{Dim, Node, Op, TensorData};
use concord::op::Pool;
use concord::{DType, FallbackPolicy, Graph, NetBuilder, Overrides, Tensor};
use concord_conformance::compare::compare;
use concord_conformance::tolerance::{allowance, ToleranceTable};

/// Runs `graph` on the reference and on OpenCL and compares every output at the model level.
fn agree(test: &str, graph: Graph, seed: u64) -> Result<(), String> {
    agree_on(test, graph, seed, common::shared_registry())
}

/// [`agree`] with OpenCL from `registry`.
fn agree_on(
    test: &str,
    graph: Graph,
    seed: u64,
    registry: concord::ExecutorRegistry,
) -> Result<(), String> {
    let here = opencl_here(test);
    let info = &graph.inputs[0];
    let dims: Vec<usize> = info
        .shape
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => *n,
            other => panic!("the input dims must be fixed, got {other:?}"),
        })
        .collect();
    let input = Lcg::new(seed).tensor(&dims, 1.0);
    let input = if info.dtype == DType::F16 {
        to_f16(&input)
    } else {
        input
    };
    let reference = NetBuilder::from_graph(graph.clone())
        .overrides(Overrides::default())
        .build()
        .map_err(|e| format!("{}: reference build: {e}", graph.name))?;
    let net = NetBuilder::from_graph(graph.clone())
        .registry(registry)
        .backend(concord::backends::OPENCL)
        .fallback(FallbackPolicy::Allow)
        .overrides(Overrides::default())
        .build()
        .map_err(|e| format!("{}: OpenCL build: {e}", graph.name))?;
    if let OpenClHere::Available = here {
        let off: Vec<String> = net
            .placement()
            .nodes
            .iter()
            .filter(|n| n.executor != "opencl")
            .map(|n| format!("{} ({}) on {}", n.name, n.op, n.executor))
            .collect();
        if !off.is_empty() {
            return Err(format!("{}: not on OpenCL: {}", graph.name, off.join(", ")));
        }
    }
    let feed = || [(info.name.clone(), input.clone())];
    let expected = reference.forward(feed()).map_err(|e| e.to_string())?;
    let actual = net.forward(feed()).map_err(|e| e.to_string())?;
    let table = ToleranceTable::builtin().map_err(|e| e.to_string())?;
    let level = table.level("model").ok_or("no `model` level")?.level;
    for (name, want) in expected.iter() {
        let got = actual
            .get(name)
            .ok_or(format!("{}: no output {name}", graph.name))?;
        let f32_storage = concord::TargetSpec::new(
            concord::targets::OPENCL,
            concord::DType::F32,
            concord::DType::F32,
        );
        let allowed = allowance(level, &f32_storage, want, None)?;
        let c = compare(name, got, want, &|i, _| allowed[i]);
        if !c.passed() {
            return Err(format!("{}: {}", graph.name, c.describe()));
        }
    }
    Ok(())
}

/// `graph` on OpenCL, nodes it declines on the reference as `policy` allows, with each
/// node's time recorded when `profiling`.
fn opencl_net(
    graph: Graph,
    policy: FallbackPolicy,
    profiling: bool,
) -> Result<concord::Net, concord::Error> {
    NetBuilder::from_graph(graph)
        .registry(common::shared_registry())
        .backend(concord::backends::OPENCL)
        .fallback(policy)
        .overrides(Overrides::default())
        .profiling(profiling)
        .build()
}

fn to_f16(t: &Tensor) -> Tensor {
    let v = t
        .as_f32()
        .expect("f32")
        .iter()
        .map(|&x| npyz::half::f16::from_f32(x));
    Tensor::from_f16(t.dims().to_vec(), v.collect()).expect("same shape")
}

/// The same graph with f16 inputs and initializers.
fn as_f16(mut graph: Graph) -> Graph {
    graph.name += "_f16";
    for input in &mut graph.inputs {
        input.dtype = DType::F16;
    }
    for t in graph.initializers.values_mut() {
        if matches!(t.data(), TensorData::F32(_)) {
            *t = to_f16(t);
        }
    }
    graph
}

/// One Conv → BatchNormalization → ReLU6 layer, optionally with dilation.
fn layer(cin: usize, cout: usize, size: usize, k: usize, stride: usize, group: usize) -> Graph {
    let mut b = CnnBuilder::new(
        &format!("conv_{cin}_{cout}_{size}_k{k}_s{stride}_g{group}"),
        &[1, cin, size, size],
        7,
    );
    let y = b.conv_bn("input", cin, cout, k, stride, group);
    let y = b.relu6(&y);
    b.graph.outputs.push(y);
    b.graph
}

/// A layer on an input of `height` rows of `size` columns (the builder's are square).
fn tall(cin: usize, size: usize, height: usize, k: usize, stride: usize) -> Graph {
    let mut g = layer(cin, cin, size, k, stride, cin);
    g.name += &format!("_h{height}");
    g.inputs[0].shape[2] = Dim::Fixed(height);
    g
}

/// Conv → BatchNormalization → Sigmoid.
fn gated_layer(
    cin: usize,
    cout: usize,
    size: usize,
    k: usize,
    stride: usize,
    group: usize,
) -> Graph {
    let mut b = CnnBuilder::new(
        &format!("conv_{cin}_{cout}_{size}_k{k}_s{stride}_g{group}_sigmoid"),
        &[1, cin, size, size],
        7,
    );
    let y = b.conv_bn("input", cin, cout, k, stride, group);
    let y = b.unary(Op::Unary(concord::op::Unary::Sigmoid), &y);
    b.graph.outputs.push(y);
    b.graph
}

/// A layer whose conv has dilation 2 (the builder's convs have none).
fn dilated(cin: usize, cout: usize, size: usize, stride: usize, group: usize) -> Graph {
    let mut g = layer(cin, cout, size, 3, stride, group);
    g.name += "_d2";
    if let Some(Node {
        op: Op::Conv(conv), ..
    }) = g.nodes.first_mut()
    {
        conv.dilations = vec![2, 2];
        conv.pads = vec![2; 4];
    }
    g
}

fn max_pool(size: usize, k: usize, stride: usize, pad: usize, ceil_mode: bool) -> Graph {
    let mut g = Graph {
        name: format!("maxpool_{size}_k{k}_s{stride}_p{pad}_ceil{ceil_mode}"),
        inputs: vec![concord::ValueInfo::fixed(
            "input",
            DType::F32,
            &[1, 5, size, size],
        )],
        outputs: vec!["y".into()],
        opset: 17,
        ..Graph::default()
    };
    let pool = Pool {
        kernel_shape: vec![k, k],
        strides: vec![stride, stride],
        pads: vec![pad; 4],
        ceil_mode,
        ..Pool::default()
    };
    g.nodes
        .push(Node::new("pool", Op::MaxPool(pool), &["input"], &["y"]));
    g
}

/// A squeeze-excite block as MobileNetV3's exporters write it: GlobalAveragePool → 1×1
/// Conv (C → M) → Relu → 1×1 Conv (M → C) → HardSigmoid → Mul with the input, which the OpenCL executor
/// folds into one launch (fuse.rs, absorb_excite); either conv may lack its bias.
fn squeeze_excite(batch: usize, c: usize, m: usize, size: usize, biases: [bool; 2]) -> Graph {
    squeeze_excite_gated(batch, c, m, size, biases, hard_sigmoid())
}

fn hard_sigmoid() -> Op {
    Op::Unary(concord::op::Unary::HardSigmoid {
        alpha: 1.0 / 6.0,
        beta: 0.5,
    })
}

/// [`squeeze_excite`] with `gate` in the HardSigmoid's place (EfficientNet's is a Sigmoid).
fn squeeze_excite_gated(
    batch: usize,
    c: usize,
    m: usize,
    size: usize,
    biases: [bool; 2],
    gate: Op,
) -> Graph {
    let mut g = Graph {
        name: format!(
            "squeeze_excite_{batch}x{c}x{size}_m{m}_bias{biases:?}_{}",
            gate.name()
        ),
        inputs: vec![concord::ValueInfo::fixed(
            "input",
            DType::F32,
            &[batch, c, size, size],
        )],
        outputs: vec!["y".into()],
        opset: 17,
        ..Graph::default()
    };
    let mut lcg = Lcg::new(c as u64 * 31 + m as u64);
    let mut conv = |g: &mut Graph, name: &str, x: &str, out: usize, inn: usize, bias: bool| {
        let w = format!("{name}_w");
        g.initializers
            .insert(w.clone(), lcg.tensor(&[out, inn, 1, 1], 0.5));
        let mut inputs = vec![x.to_string(), w];
        if bias {
            let b = format!("{name}_b");
            g.initializers.insert(b.clone(), lcg.tensor(&[out], 0.5));
            inputs.push(b);
        }
        let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let y = format!("{name}_y");
        g.nodes.push(Node::new(
            name,
            Op::Conv(concord::op::Conv::default()),
            &inputs,
            &[&y],
        ));
        y
    };
    g.nodes.push(Node::new(
        "pool",
        Op::GlobalAveragePool,
        &["input"],
        &["pooled"],
    ));
    let a = conv(&mut g, "fc1", "pooled", m, c, biases[0]);
    g.nodes.push(Node::new(
        "relu",
        Op::Unary(concord::op::Unary::Relu),
        &[&a],
        &["a_relu"],
    ));
    let s = conv(&mut g, "fc2", "a_relu", c, m, biases[1]);
    g.nodes.push(Node::new("gate", gate, &[&s], &["scale"]));
    g.nodes.push(Node::new(
        "excite",
        Op::Binary(concord::op::Binary::Mul),
        &["input", "scale"],
        &["y"],
    ));
    g
}

fn check_all(test: &str, graphs: Vec<Graph>) {
    let failures: Vec<String> = graphs
        .into_iter()
        .enumerate()
        .filter_map(|(i, g)| agree(test, g, 100 + i as u64).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn cnn_models_agree_with_the_reference() {
    check_all(
        "cnn_models_agree_with_the_reference",
        vec![
            common::resnet18_like(96, 8, 10),
            common::mobilenet_v2_like(96, 0.5, 10),
        ],
    );
}

#[test]
fn wide_and_ragged_layers_agree_with_the_reference() {
    let mut graphs = vec![
        // The stem (conv_rows): stride 2, 7×7, output rows of 38 (two chunks and a part).
        layer(3, 16, 75, 7, 2, 1),
        layer(3, 10, 64, 3, 2, 1),
        layer(3, 8, 40, 3, 2, 1),
        layer(4, 24, 33, 5, 2, 1),
        // Strided convs with many channels (im2col), stride-1 3×3 (conv_shift), 1×1.
        layer(24, 20, 37, 3, 2, 1),
        layer(12, 20, 37, 3, 1, 1),
        layer(24, 20, 37, 1, 1, 1),
        layer(24, 20, 32, 1, 1, 1),
        layer(24, 40, 14, 1, 1, 1),
        layer(40, 24, 7, 1, 1, 1),
        // Depthwise, strides 1 and 2, wide and ragged, and a channel multiplier.
        layer(12, 12, 40, 3, 1, 12),
        layer(12, 12, 41, 3, 2, 12),
        layer(6, 12, 35, 5, 2, 6),
        // 5×5 taps on rows wide enough for chunks wholly inside them (left pad 2), at
        // strides 1 and 2.
        layer(6, 6, 40, 5, 1, 6),
        layer(4, 4, 75, 5, 2, 4),
        layer(8, 8, 13, 7, 1, 8),
        layer(8, 8, 20, 5, 1, 8),
        layer(8, 8, 21, 9, 1, 8),
        layer(16, 16, 7, 3, 1, 16),
        // Stride 2 read in place (depthwise_inplace) with left pads of 1, 2 and 3 (odd and
        // even columns shifted into the pad), odd and even widths, and planes tall enough
        // for blocks of four rows between the edge rows, with one to five rows left after
        // the last block (taken one at a time).
        layer(8, 8, 29, 3, 2, 8),
        layer(8, 8, 30, 5, 2, 8),
        layer(8, 8, 29, 7, 2, 8),
        layer(8, 8, 19, 3, 2, 8),
        layer(4, 4, 70, 3, 2, 4),
        // Small planes: 4×4 with 5×5 taps, the 8-wide edge, a channel multiplier, dilation
        // 2, a one-pixel plane, and a left pad of 4 (depthwise_rows).
        layer(16, 16, 4, 5, 1, 16),
        layer(8, 8, 8, 3, 1, 8),
        layer(6, 12, 6, 3, 1, 6),
        dilated(8, 8, 6, 1, 8),
        layer(8, 8, 1, 3, 1, 8),
        layer(8, 8, 6, 9, 1, 8),
        // depthwise_flat (rows of at most 8, 48 values or more, padding K / 2: chunks of
        // the flat plane, lanes crossing rows): 7×7 and 8×8 with 3×3 taps, 7×7 with 5×5, a
        // channel multiplier, a plane 8 wide and 20 tall, a Sigmoid in the epilogue.
        layer(24, 24, 7, 3, 1, 24),
        layer(16, 16, 7, 5, 1, 16),
        layer(6, 12, 7, 3, 1, 6),
        tall(4, 8, 20, 3, 1),
        gated_layer(16, 16, 8, 3, 1, 16),
        // Rows narrower than a vector, stored whole onto the next row but for a work-item's
        // last (depthwise_inplace takes 2,048 outputs' worth of rows: 256 rows of 8, so
        // 300 rows are two work-items), at strides 1 and 2.
        tall(4, 8, 300, 3, 1),
        tall(4, 14, 600, 3, 2),
        // A Sigmoid taken into the epilogue of a dense conv and of a depthwise one.
        gated_layer(12, 20, 37, 3, 1, 1),
        gated_layer(16, 16, 6, 3, 1, 16),
        dilated(8, 8, 37, 1, 8),
        dilated(8, 8, 37, 2, 8),
        dilated(4, 8, 37, 1, 1),
        // MaxPool: the ResNet stem's, ragged, ceil_mode, stride 1.
        max_pool(112, 3, 2, 1, false),
        max_pool(37, 3, 2, 1, true),
        max_pool(36, 2, 2, 0, true),
        max_pool(33, 3, 1, 1, false),
    ];
    let f16: Vec<Graph> = graphs.iter().cloned().map(as_f16).collect();
    graphs.extend(f16);
    check_all("wide_and_ragged_layers_agree_with_the_reference", graphs);
}

/// The register-blocked GEMM with eight rows of sums (what AVX-512 devices get, forced
/// here on any device) takes two B panels per work-item where A is packed (PAIR in
/// gemm.cl): 1×1 convs whose images are an even number of full panels, an
/// even number with a ragged last one, an odd number (the last work-item has one panel), and
/// an even number whose last panel is under four columns (which goes one column at a time,
/// so that work-item takes its panels one by one); a strided 3×3 conv on packed im2col
/// panels; stride-1 3×3 convs and strided convs with few channels, whose work-items take
/// two chunks of output columns (conv_taps_pair); residual Adds fused into paired convs;
/// and the f16-storage build of each.
#[test]
fn paired_panels_agree_with_the_reference() {
    let test = "paired_panels_agree_with_the_reference";
    let executor = std::sync::Arc::new(concord_opencl::OpenClExecutor::with_options(
        concord_opencl::OpenClOptions {
            gemm: concord_opencl::GemmKernel::RegisterBlocked,
            block_rows: concord_opencl::BlockRows::Eight,
            ..concord_opencl::OpenClOptions::default()
        },
    ));
    let registry = || concord::ExecutorRegistry::with_builtins().with(executor.clone());
    // 32×32 = 64 full panels; 37×37 = 1,369 = 85 panels and 9 columns; 35×35 = 1,225 = 76
    // panels and 9; 39×39 = 1,521 = 95 panels and 1.
    let mut graphs = vec![
        layer(24, 20, 32, 1, 1, 1),
        layer(24, 20, 37, 1, 1, 1),
        layer(16, 40, 35, 1, 1, 1),
        layer(16, 12, 39, 1, 1, 1),
        layer(24, 16, 80, 3, 2, 1),
        residual(20, 33, 1),
        // Stride-1 3×3 convs (conv_shift): rows of 39 padded columns, 91 chunks of them
        // (odd, chunks straddling rows); rows widened to 32 columns, the second chunk of
        // each ending its row; a residual.
        layer(12, 20, 37, 3, 1, 1),
        layer(8, 72, 30, 3, 1, 1),
        residual(16, 40, 3),
        // Strided convs with few channels (conv_rows, two chunks of a row per work-item):
        // output rows of 38 (a pair and a ragged single), of 17 (a whole chunk and one
        // column) and of 32 (two whole chunks).
        layer(3, 16, 75, 7, 2, 1),
        layer(4, 24, 33, 5, 2, 1),
        layer(3, 10, 64, 3, 2, 1),
    ];
    let f16: Vec<Graph> = graphs.iter().cloned().map(as_f16).collect();
    graphs.extend(f16);
    let failures: Vec<String> = graphs
        .into_iter()
        .enumerate()
        .filter_map(|(i, g)| agree_on(test, g, 300 + i as u64, registry()).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A k×k conv whose output is added to its input (the Add fused into the conv's epilogue
/// as a residual), then ReLU6.
fn residual(c: usize, size: usize, k: usize) -> Graph {
    let mut b = CnnBuilder::new(&format!("residual_{c}_{size}_k{k}"), &[1, c, size, size], 9);
    let y = b.conv_bn("input", c, c, k, 1, 1);
    let y = b.add(&y, "input");
    let y = b.relu6(&y);
    b.graph.outputs.push(y);
    b.graph
}

/// Squeeze-excite blocks folded into their pool agree with the reference: with and without
/// either bias, batch 2, a plane of one pixel, more channels than a work-group has items,
/// and f16 storage. Each fold is checked too: the two convs and the Mul that applies the
/// scales are reported fused.
#[test]
fn folded_squeeze_excite_blocks_agree_with_the_reference() {
    let test = "folded_squeeze_excite_blocks_agree_with_the_reference";
    let mut graphs = vec![
        squeeze_excite(1, 16, 4, 5, [true, true]),
        squeeze_excite(2, 24, 8, 3, [false, true]),
        squeeze_excite(2, 72, 24, 1, [true, false]),
        squeeze_excite(1, 200, 48, 4, [false, false]),
        squeeze_excite_gated(
            2,
            32,
            8,
            4,
            [true, true],
            Op::Unary(concord::op::Unary::Sigmoid),
        ),
    ];
    let f16: Vec<Graph> = graphs.iter().cloned().map(as_f16).collect();
    graphs.extend(f16);
    if let OpenClHere::Available = opencl_here(test) {
        for graph in &graphs {
            let net = opencl_net(graph.clone(), FallbackPolicy::Deny, true)
                .unwrap_or_else(|e| panic!("{test}: {}: {e}", graph.name));
            let input = Lcg::new(3).tensor(&graph_dims(graph), 1.0);
            let input = if graph.inputs[0].dtype == DType::F16 {
                to_f16(&input)
            } else {
                input
            };
            // The first forward is the warm-up the profile leaves out.
            for _ in 0..2 {
                net.forward([("input", input.clone())])
                    .unwrap_or_else(|e| panic!("{test}: {}: {e}", graph.name));
            }
            let profile = net.profile();
            for conv in ["fc1", "fc2", "excite"] {
                let entry = profile.entries.iter().find(|e| e.name == conv);
                assert!(
                    entry.is_some_and(|e| e.fused_into.as_deref() == Some("pool")),
                    "{test}: {}: {conv} is not folded into the pool: {entry:?} in {:?}",
                    graph.name,
                    profile.entries
                );
            }
        }
    }
    check_all(test, graphs);
}

/// A graph of one input being built node by node, with its constants.
struct Views {
    g: Graph,
    lcg: Lcg,
}

impl Views {
    fn new(name: &str, dims: &[usize], outputs: &[&str]) -> Views {
        Views {
            g: Graph {
                name: name.into(),
                inputs: vec![concord::ValueInfo::fixed("input", DType::F32, dims)],
                outputs: outputs.iter().map(|o| o.to_string()).collect(),
                opset: 18,
                ..Graph::default()
            },
            lcg: Lcg::new(dims.iter().sum::<usize>() as u64),
        }
    }

    fn ints(&mut self, name: &str, values: &[i64]) -> String {
        let t = Tensor::from_i64([values.len()], values.to_vec()).expect("ints");
        self.g.initializers.insert(name.into(), t);
        name.into()
    }

    fn weight(&mut self, name: &str, dims: &[usize]) -> String {
        let t = self.lcg.tensor(dims, 0.5);
        self.g.initializers.insert(name.into(), t);
        name.into()
    }

    fn node(&mut self, op: Op, inputs: &[&str], output: &str) -> String {
        self.g.nodes.push(Node::new(output, op, inputs, &[output]));
        output.into()
    }

    fn transpose(&mut self, x: &str, perm: &[i64], y: &str) -> String {
        self.node(
            Op::Transpose {
                perm: Some(perm.to_vec()),
            },
            &[x],
            y,
        )
    }

    fn reshape(&mut self, x: &str, dims: &[i64], y: &str) -> String {
        let shape = self.ints(&format!("{y}_shape"), dims);
        self.node(Op::Reshape { allowzero: false }, &[x, &shape], y)
    }

    fn slice(&mut self, x: &str, se: [&[i64]; 2], axes: &[i64], steps: &[i64], y: &str) -> String {
        let starts = self.ints(&format!("{y}_starts"), se[0]);
        let ends = self.ints(&format!("{y}_ends"), se[1]);
        let axes = self.ints(&format!("{y}_axes"), axes);
        let steps = self.ints(&format!("{y}_steps"), steps);
        self.node(Op::Slice, &[x, &starts, &ends, &axes, &steps], y)
    }

    fn gather(&mut self, x: &str, indices: Tensor, axis: i64, y: &str) -> String {
        let name = format!("{y}_indices");
        self.g.initializers.insert(name.clone(), indices);
        self.node(Op::Gather { axis }, &[x, &name], y)
    }

    fn binary(&mut self, op: concord::op::Binary, a: &str, b: &str, y: &str) -> String {
        self.node(Op::Binary(op), &[a, b], y)
    }
}

/// Attention as PyTorch exports it: the fused q/k/v projection split by a Transpose and
/// Gathers of constant indices, heads split and merged by Reshape and Transpose, K
/// transposed, q scaled. Every movement op here makes a view, which MatMul, Mul and Gemm
/// read in place; the merge of the heads is copied out (no strides make it a [6, 16]).
fn attention_views() -> Graph {
    use concord::op::Binary;
    let mut v = Views::new("attention_views", &[6, 48], &["y", "kt"]);
    v.reshape("input", &[6, 3, 2, 8], "qkv");
    v.transpose("qkv", &[1, 2, 0, 3], "heads");
    let q = v.gather("heads", Tensor::scalar_i64(0), 0, "q");
    v.gather("heads", Tensor::scalar_i64(1), 0, "k");
    let vv = v.gather("heads", Tensor::scalar_i64(2), 0, "v");
    let kt = v.transpose("k", &[0, 2, 1], "kt");
    let scale = "scale".to_string();
    v.g.initializers
        .insert(scale.clone(), Tensor::scalar_f32(0.35));
    let qs = v.binary(Binary::Mul, &q, &scale, "qs");
    let s = v.node(Op::MatMul, &[&qs, &kt], "scores");
    let p = v.node(Op::Softmax { axis: -1 }, &[&s], "probs");
    let o = v.node(Op::MatMul, &[&p, &vv], "o");
    v.transpose(&o, &[1, 0, 2], "merged");
    v.reshape("merged", &[6, 16], "flat");
    let w = v.weight("w", &[5, 16]);
    let bias = v.weight("bias", &[5]);
    v.node(
        Op::Gemm(concord::op::Gemm {
            trans_b: true,
            ..Default::default()
        }),
        &["flat", &w, &bias],
        "y",
    );
    v.g
}

/// Slice, Split, Expand and Gather views read by binary kernels (with offsets, strides and
/// the 0 stride of a broadcast), by a unary kernel, by MatMul (rows unevenly spaced across
/// batches, a reversing slice copied out first) and by Concat, and copied out for graph
/// outputs; and a Slice of the first rows, which is no view but another name.
fn slice_views() -> Graph {
    use concord::op::Binary;
    let mut v = Views::new(
        "slice_views",
        &[4, 10, 12],
        &[
            "sum",
            "mm_rev",
            "cat",
            "relu",
            "mm_rows",
            "mm_batched",
            "split_b",
            "mm_prefix",
        ],
    );
    let s1 = v.slice("input", [&[1, 2], &[9, 11]], &[1, 2], &[2, 3], "s1");
    let s2 = v.slice("input", [&[0, 0], &[4, 3]], &[1, 2], &[1, 1], "s2");
    v.binary(Binary::Sub, &s1, &s2, "sum");
    let rev = v.slice("input", [&[-1], &[-100]], &[2], &[-2], "rev");
    let w6 = v.weight("w6", &[6, 5]);
    v.node(Op::MatMul, &[&rev, &w6], "mm_rev");
    let split = Node::new(
        "split",
        Op::Split {
            axis: 1,
            num_outputs: 2,
        },
        &["input", "split_sizes"],
        &["split_a", "split_b"],
    );
    v.ints("split_sizes", &[3, 7]);
    v.g.nodes.push(split);
    v.node(Op::Concat { axis: 1 }, &["split_b", "split_a"], "cat");
    let one = v.gather(
        "input",
        Tensor::from_i64([1], vec![2]).expect("index"),
        1,
        "one",
    );
    let shape = v.ints("expand_shape", &[4, 5, 12]);
    let e = v.node(Op::Expand, &[&one, &shape], "expanded");
    let head = v.slice("input", [&[0], &[5]], &[1], &[1], "head");
    let added = v.binary(Binary::Add, &e, &head, "added");
    let picked = v.gather(
        &added,
        Tensor::from_i64([3], vec![1, 4, 7]).expect("indices"),
        2,
        "picked",
    );
    v.node(Op::Unary(concord::op::Unary::Relu), &[&picked], "relu");
    let rows = v.slice("input", [&[1], &[3]], &[0], &[1], "rows");
    v.reshape(&rows, &[20, 12], "rows_flat");
    let w12 = v.weight("w12", &[12, 4]);
    v.node(Op::MatMul, &["rows_flat", &w12], "mm_rows");
    v.transpose("input", &[1, 0, 2], "swapped");
    v.node(Op::MatMul, &["swapped", &w12], "mm_batched");
    // The first rows in order: no view, another name for the input's buffer.
    let prefix = v.slice("input", [&[0], &[2]], &[0], &[1], "prefix");
    v.reshape(&prefix, &[20, 12], "prefix_flat");
    v.node(Op::MatMul, &["prefix_flat", &w12], "mm_prefix");
    v.g
}

/// Movement ops make views instead of copies; each consumer reads them in place or copies
/// them out. A wrong stride, offset or shuffle in a view shows up in these outputs.
#[test]
fn movement_views_agree_with_the_reference() {
    check_all(
        "movement_views_agree_with_the_reference",
        vec![
            attention_views(),
            slice_views(),
            as_f16(attention_views()),
            as_f16(slice_views()),
        ],
    );
}

/// GRU and LSTM layers whose Y a Transpose alone reads, which the walk then stores at the
/// permuted strides: a bidirectional LSTM's Y to [seq, batch, dirs, hidden] and reshaped
/// for a GRU (PyTorch's stacked layers), a batch-first LSTM's Y and a bidirectional GRU's
/// (linear_before_reset) moved by other perms. Hidden sizes 10, 7 and 9 leave ragged row
/// blocks, and dirs and batch differ, so a stride applied to the wrong axis shows.
fn recurrent_transposes() -> Graph {
    use concord::op::{Recurrent, RecurrentCell, RnnDirection};
    let mut v = Views::new(
        "recurrent_transposes",
        &[5, 3, 6],
        &["stacked", "batch_first", "gru_moved"],
    );
    let layer = |v: &mut Views, r: Recurrent, x: &str, input: usize, hidden: usize, y: &str| {
        let dirs = r.direction.count();
        let rows = r.cell.gates() * hidden;
        let w = v.weight(&format!("{y}_w"), &[dirs, rows, input]);
        let rw = v.weight(&format!("{y}_r"), &[dirs, rows, hidden]);
        let b = v.weight(&format!("{y}_b"), &[dirs, 2 * rows]);
        v.node(Op::Recurrent(r), &[x, &w, &rw, &b], y)
    };
    let lstm = Recurrent::new(RecurrentCell::Lstm, RnnDirection::Bidirectional);
    layer(&mut v, lstm.clone(), "input", 6, 10, "lstm_y");
    v.transpose("lstm_y", &[0, 2, 1, 3], "lstm_t");
    v.reshape("lstm_t", &[5, 3, 20], "lstm_flat");
    layer(
        &mut v,
        Recurrent::new(RecurrentCell::Gru, RnnDirection::Forward),
        "lstm_flat",
        20,
        7,
        "gru_y",
    );
    v.reshape("gru_y", &[5, 3, 7], "stacked");
    v.transpose("input", &[1, 0, 2], "batch_major_x");
    let batch_major = Recurrent {
        batch_major: true,
        ..lstm
    };
    layer(&mut v, batch_major, "batch_major_x", 6, 10, "bm_y");
    v.transpose("bm_y", &[2, 0, 1, 3], "batch_first");
    let gru = Recurrent {
        linear_before_reset: true,
        ..Recurrent::new(RecurrentCell::Gru, RnnDirection::Bidirectional)
    };
    layer(&mut v, gru, "input", 6, 9, "gru2_y");
    v.transpose("gru2_y", &[1, 2, 0, 3], "gru_moved");
    v.g
}

/// A Transpose of a GRU's or LSTM's Y is folded into where the walk stores Y; the outputs
/// agree with the reference, and on OpenCL the three Transposes are reported fused.
#[test]
fn recurrent_transposes_agree_with_the_reference() {
    let test = "recurrent_transposes_agree_with_the_reference";
    check_all(test, vec![recurrent_transposes()]);
    if let OpenClHere::Available = opencl_here(test) {
        let net =
            opencl_net(recurrent_transposes(), FallbackPolicy::Allow, true).expect("OpenCL build");
        // The first forward is the profile's warm-up.
        for _ in 0..2 {
            let input = Lcg::new(1).tensor(&[5, 3, 6], 1.0);
            net.forward([("input".to_string(), input)])
                .expect("OpenCL forward");
        }
        let profile = net.profile();
        for (transpose, into) in [
            ("lstm_t", "lstm_y"),
            ("batch_first", "bm_y"),
            ("gru_moved", "gru2_y"),
        ] {
            let entry = profile
                .entries
                .iter()
                .find(|e| e.kind == "node" && e.name == transpose);
            assert_eq!(
                entry.and_then(|e| e.fused_into.as_deref()),
                Some(into),
                "{test}: {transpose} is not fused into {into}: {profile}"
            );
        }
    }
}

/// A Gemm whose output reaches a residual Add through layout-only steps: `kind` 0 as
/// torchvision's attention writes its output projection (Reshape to [4, 1, 6], a Transpose
/// that moves the axis of extent 1, Add), 2 an Unsqueeze (the residual first in the Add),
/// and 1 a Transpose that swaps two axes of extent 2, which moves elements and must not be
/// fused. The residual is another Gemm's output, reshaped.
fn viewed_residual(kind: usize) -> Graph {
    use concord::op::{Binary, Gemm};
    let mut v = Views::new(&format!("viewed_residual_{kind}"), &[4, 8], &["y"]);
    let w = v.weight("w", &[8, 6]);
    let w2 = v.weight("w2", &[8, 6]);
    let bias = v.weight("bias", &[6]);
    v.node(Op::Gemm(Gemm::default()), &["input", &w2], "skip");
    let residual_dims: &[i64] = if kind == 1 { &[2, 2, 6] } else { &[1, 4, 6] };
    v.reshape("skip", residual_dims, "r");
    v.node(Op::Gemm(Gemm::default()), &["input", &w, &bias], "proj");
    match kind {
        0 => {
            v.reshape("proj", &[4, 1, 6], "split");
            v.transpose("split", &[1, 0, 2], "moved");
            v.binary(Binary::Add, "moved", "r", "y");
        }
        1 => {
            v.reshape("proj", &[2, 2, 6], "split");
            v.transpose("split", &[1, 0, 2], "moved");
            v.binary(Binary::Add, "moved", "r", "y");
        }
        _ => {
            let axes = v.ints("axes", &[0]);
            v.node(Op::Unsqueeze, &["proj", &axes], "moved");
            v.binary(Binary::Add, "r", "moved", "y");
        }
    }
    v.g
}

/// The residual Adds of [`viewed_residual`] agree with the reference on f32 and f16
/// storage; on OpenCL the Add and the layout steps before it are reported fused into the
/// Gemm, but for the Transpose that moves elements, which stays a node of its own.
#[test]
fn viewed_residuals_agree_with_the_reference() {
    let test = "viewed_residuals_agree_with_the_reference";
    let graphs: Vec<Graph> = (0..3).map(viewed_residual).collect();
    let f16: Vec<Graph> = graphs.iter().cloned().map(as_f16).collect();
    check_all(test, graphs.into_iter().chain(f16).collect());
    if let OpenClHere::Available = opencl_here(test) {
        for (kind, fused) in [(0, true), (1, false), (2, true)] {
            let net = opencl_net(viewed_residual(kind), FallbackPolicy::Allow, true)
                .expect("OpenCL build");
            // The first forward is the profile's warm-up.
            for _ in 0..2 {
                let input = Lcg::new(3).tensor(&[4, 8], 1.0);
                net.forward([("input".to_string(), input)])
                    .expect("OpenCL forward");
            }
            let profile = net.profile();
            let into = |name: &str| {
                profile
                    .entries
                    .iter()
                    .find(|e| e.kind == "node" && e.name == name)
                    .and_then(|e| e.fused_into.clone())
            };
            let expected = fused.then(|| "proj".to_string());
            assert_eq!(into("y"), expected, "{test}: kind {kind}: {profile}");
            assert_eq!(into("moved"), expected, "{test}: kind {kind}: {profile}");
        }
    }
}

/// A projection with a bias and a residual Add whose operands' shapes the graph leaves
/// open (dims named differently), as transformers exported with dynamic axes have them:
/// the GEMM takes the residual into its epilogue when the concrete shapes agree, and runs
/// it as a separate Add when the residual broadcasts.
fn open_residual(gemm: bool) -> Graph {
    use concord::executor::Dim;
    let dims = |name: &str| vec![Dim::Named(name.into()), Dim::Fixed(24)];
    let mut g = Graph {
        name: format!("open_residual_{}", if gemm { "gemm" } else { "matmul" }),
        inputs: vec![
            concord::ValueInfo::new("x", DType::F32, dims("rows")),
            concord::ValueInfo::new("r", DType::F32, dims("residual_rows")),
        ],
        outputs: vec!["y".into()],
        opset: 18,
        ..Graph::default()
    };
    let mut lcg = Lcg::new(24);
    g.initializers
        .insert("w".into(), lcg.tensor(&[24, 24], 0.5));
    g.initializers.insert("bias".into(), lcg.tensor(&[24], 0.5));
    if gemm {
        g.nodes.push(Node::new(
            "proj",
            Op::Gemm(concord::op::Gemm::default()),
            &["x", "w", "bias"],
            &["p"],
        ));
    } else {
        g.nodes
            .push(Node::new("proj", Op::MatMul, &["x", "w"], &["m"]));
        g.nodes.push(Node::new(
            "proj_bias",
            Op::Binary(concord::op::Binary::Add),
            &["m", "bias"],
            &["p"],
        ));
    }
    g.nodes.push(Node::new(
        "residual",
        Op::Binary(concord::op::Binary::Add),
        &["r", "p"],
        &["y"],
    ));
    g
}

/// The residual of [`open_residual`], fused when the rows agree and split when the
/// residual's one row broadcasts, gives the reference's values either way.
#[test]
fn residuals_of_open_shapes_agree_with_the_reference() {
    let test = "residuals_of_open_shapes_agree_with_the_reference";
    let here = opencl_here(test);
    let mut failures = Vec::new();
    for gemm in [false, true] {
        let graph = open_residual(gemm);
        let reference = NetBuilder::from_graph(graph.clone())
            .overrides(Overrides::default())
            .build()
            .expect("reference build");
        let net = opencl_net(graph.clone(), FallbackPolicy::Allow, true).expect("OpenCL build");
        if let OpenClHere::Available = here {
            let placement = net.placement();
            assert!(
                placement.nodes.iter().all(|n| n.executor == "opencl"),
                "{}: not all on OpenCL: {placement:?}",
                graph.name
            );
        }
        for (rows, residual_rows) in [(5, 5), (5, 1), (1, 5)] {
            let lcg = Lcg::new(rows as u64 * 7 + residual_rows as u64);
            let feed = || {
                [
                    ("x".to_string(), lcg.clone().tensor(&[rows, 24], 1.0)),
                    (
                        "r".to_string(),
                        Lcg::new(3).tensor(&[residual_rows, 24], 1.0),
                    ),
                ]
            };
            let want = reference.forward(feed()).expect("reference forward");
            let got = net.forward(feed()).expect("OpenCL forward");
            let (want, got) = (want.get("y").expect("y"), got.get("y").expect("y"));
            let close = want.dims() == got.dims()
                && want
                    .as_f32()
                    .expect("f32")
                    .iter()
                    .zip(got.as_f32().expect("f32"))
                    .all(|(a, b)| (a - b).abs() <= 1e-4 * (1.0 + a.abs()));
            if !close {
                failures.push(format!(
                    "{} with {rows} rows and {residual_rows} residual rows: got {:?} {:?}, \
                     expected {:?} {:?}",
                    graph.name,
                    got.dims(),
                    &got.as_f32().expect("f32")[..4.min(got.as_f32().expect("f32").len())],
                    want.dims(),
                    &want.as_f32().expect("f32")[..4.min(want.as_f32().expect("f32").len())]
                ));
            }
        }
        if let OpenClHere::Available = here {
            // On OpenCL the residual Add is fused into the projection.
            let profile = net.profile();
            let add = profile.entries.iter().find(|e| e.name == "residual");
            assert_eq!(
                add.and_then(|e| e.fused_into.as_deref()),
                Some("proj"),
                "{}: the residual Add is not fused: {profile}",
                graph.name
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn graph_dims(graph: &Graph) -> Vec<usize> {
    graph.inputs[0]
        .shape
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => *n,
            other => panic!("the input dims must be fixed, got {other:?}"),
        })
        .collect()
}

/// A profiled OpenCL forward reports every node (a fused one with zero time and the name
/// of the node its work is in), the convolutions with the device time their
/// kernels took, and computes exactly what an unprofiled net computes.
#[test]
fn profiled_forward_times_every_node_on_the_device() {
    let here = opencl_here("profiled_forward_times_every_node_on_the_device");
    let graph = common::mobilenet_v2_like(64, 0.5, 10);
    let input = common::image(64, 21);
    let build = |profiling: bool| {
        opencl_net(graph.clone(), FallbackPolicy::Allow, profiling).expect("builds")
    };
    let (profiled, plain) = (build(true), build(false));
    // The first forward is the warm-up the profile leaves out.
    profiled
        .forward([("input", input.clone())])
        .expect("forward");
    let a = profiled
        .forward([("input", input.clone())])
        .expect("forward");
    let b = plain.forward([("input", input.clone())]).expect("forward");
    assert!(
        a.get("output")
            .expect("output")
            .bit_identical(b.get("output").expect("output")),
        "profiling changed the result"
    );
    let profile = profiled.profile();
    for node in &graph.nodes {
        let entry = profile
            .entries
            .iter()
            .find(|e| e.kind == "node" && e.name == node.name)
            .unwrap_or_else(|| panic!("node {} is missing from the profile", node.name));
        assert_eq!(entry.calls, 1, "{}", node.name);
        if let (OpenClHere::Available, Op::Conv(_)) = (&here, &node.op) {
            assert_eq!(entry.ran_on, "opencl", "{}", node.name);
            assert!(
                entry.total_us > 0.0,
                "conv {} has no device time",
                node.name
            );
        }
    }
    if let OpenClHere::Available = here {
        let fused_bn = profile
            .entries
            .iter()
            .filter(|e| e.op == "BatchNormalization")
            .all(|e| e.total_us == 0.0);
        assert!(
            fused_bn,
            "a BatchNormalization fused into its Conv shows time of its own"
        );
        // Each fused node names the Conv it ran inside, and the printed profile says so
        // instead of showing it as taking no time.
        let convs: Vec<&str> = graph
            .nodes
            .iter()
            .filter(|n| matches!(n.op, Op::Conv(_)))
            .map(|n| n.name.as_str())
            .collect();
        let text = profile.to_string();
        assert!(
            profile.entries.iter().any(|e| e.op == "BatchNormalization"),
            "the model has BatchNormalization nodes to fuse: {text}"
        );
        for e in profile
            .entries
            .iter()
            .filter(|e| e.op == "BatchNormalization")
        {
            let into = e.fused_into.as_deref().unwrap_or("");
            assert!(convs.contains(&into), "{} fused into `{into}`", e.name);
            assert!(
                text.lines()
                    .any(|l| l.contains(&e.name) && l.ends_with(&format!("fused into {into}"))),
                "{text}"
            );
        }
    }
}
