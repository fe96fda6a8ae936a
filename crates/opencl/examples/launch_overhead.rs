#[path = "../tests/common/mod.rs"]
mod common;
use concord::core::{Node, Op};
use concord::{Backend, DType, FallbackPolicy, Graph, NetBuilder, Overrides, ValueInfo};
use std::time::Instant;
fn main() {
    let n: usize = std::env::args().nth(1).unwrap().parse().unwrap();
    let mut g = Graph {
        name: "chain".into(),
        inputs: vec![ValueInfo::fixed("input", DType::F32, &[1, 8, 8, 8])],
        opset: 17,
        ..Graph::default()
    };
    let mut prev = "input".to_string();
    for i in 0..n {
        let y = format!("y{i}");
        g.nodes.push(Node::new(
            &format!("n{i}"),
            if i % 2 == 0 { Op::Relu } else { Op::Neg },
            &[&prev],
            &[&y],
        ));
        prev = y;
    }
    g.outputs.push(prev);
    let input = common::Lcg::new(5).tensor(&[1, 8, 8, 8], 1.0);
    let net = NetBuilder::from_graph(g)
        .registry(common::shared_registry())
        .backend(Backend::OpenCl)
        .fallback(FallbackPolicy::Deny)
        .overrides(Overrides::default())
        .build()
        .unwrap();
    net.forward([("input", input.clone())]).unwrap();
    let mut t: Vec<f64> = (0..50)
        .map(|_| {
            let s = Instant::now();
            net.forward([("input", input.clone())]).unwrap();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("{n} nodes: median {:.3} ms", t[25]);
}
