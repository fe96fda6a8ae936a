"""Exports Concord's PyTorch/torchvision golden models to ONNX (`cargo xtask golden --export`).

Runs in the export environment (target/export-venv, pinned by
xtask/golden/requirements-export.txt), which is separate from the oracle's: this script only
makes models. For each exported case it writes, under <out>/<case>/:

  model.onnx  the model, exported by torch.onnx.export's TorchScript exporter (dynamo=False,
              the exporter that still targets opsets 11 and 12)
  spec.json   what generate.py needs to run it: description, opset, tolerance level, and the
              input runs (name, dtype, shape and distribution of every input; several runs
              when the model has a symbolic batch axis)

generate.py (the oracle environment: onnx and onnxruntime only) then makes the inputs from
numpy, runs onnxruntime and writes the expected outputs, so regenerating the oracle's data
never needs torch.

Every model is a small configuration with weights from torch.manual_seed(crc32(case name)),
in eval mode, with BatchNorm running statistics and affine parameters randomised so no
BatchNorm is the identity. Exported twice in a row, a model must serialise to the same bytes.
"""

import argparse
import copy
import io
import json
import shutil
import sys
import warnings
import zlib
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torchvision.models import efficientnet as tv_efficientnet


def seed_for(name):
    return zlib.crc32(name.encode("utf-8"))


def randomise_batchnorm(model, generator):
    """Random running stats and affine parameters, so BN is a real per-channel affine map."""
    for module in model.modules():
        if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)):
            c = module.num_features
            with torch.no_grad():
                module.running_mean.copy_(torch.randn(c, generator=generator) * 0.2)
                module.running_var.copy_(torch.rand(c, generator=generator) + 0.5)
                if module.affine:
                    module.weight.copy_(torch.rand(c, generator=generator) + 0.5)
                    module.bias.copy_(torch.randn(c, generator=generator) * 0.2)


# ---------------------------------------------------------------------------------------------
# Models. Small hand-written ones where torchvision's smallest configuration is too big.
# ---------------------------------------------------------------------------------------------


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        skip = x if self.down is None else self.down(x)
        return F.relu(y + skip)


class SmallResNet(nn.Module):
    """ResNet-18's structure (stem, MaxPool, four BasicBlock stages, pool, fc) at width 8."""

    def __init__(self, widths=(8, 16, 24, 32), classes=10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 7, 2, 3, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        blocks = []
        cin = widths[0]
        for i, w in enumerate(widths):
            blocks.append(BasicBlock(cin, w, 1 if i == 0 else 2))
            cin = w
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


class SelfAttention(nn.Module):
    """BERT's multi-head self-attention, written out so every Reshape takes its shape from
    the input's runtime Shape (nn.MultiheadAttention's traced export bakes the sequence
    length into one Reshape, and needs opset 14)."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape[0], x.shape[1], x.shape[2]
        d = h // self.heads
        qkv = self.qkv(x).reshape(b, s, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-1, -2)) / (float(h // self.heads) ** 0.5)
        context = torch.matmul(torch.softmax(scores, -1), v)
        return self.proj(context.transpose(1, 2).reshape(b, s, h))


class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, ff):
        super().__init__()
        self.attn = SelfAttention(hidden, heads)
        self.norm1 = nn.LayerNorm(hidden)
        self.ff1 = nn.Linear(hidden, ff)
        self.ff2 = nn.Linear(ff, hidden)
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, x):
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.ff2(F.gelu(self.ff1(x))))


class BertStyle(nn.Module):
    """Token + position embeddings, LayerNorm, 2 post-norm encoder layers, a per-token head."""

    def __init__(self, vocab=64, hidden=32, heads=4, ff=64, layers=2, max_len=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_len, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ff) for _ in range(layers))
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids):
        # Positions from the runtime sequence length: Shape -> Gather -> Range in the graph.
        positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        x = self.norm(self.tok(ids) + self.pos(positions))
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


class RecurrentLM(nn.Module):
    def __init__(self, cell, vocab=40, embed=16, hidden=24, layers=2, bidirectional=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(embed, hidden, num_layers=layers, bidirectional=bidirectional)
        self.out = nn.Linear(hidden * (2 if bidirectional else 1), vocab)

    def forward(self, ids):
        # ids: (sequence, batch), the layout nn.LSTM/GRU and ONNX LSTM/GRU share.
        y, _ = self.rnn(self.embed(ids))
        return self.out(y)


def conv_bn_relu(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class SmallUNet(nn.Module):
    """Two-level U-Net: one up path by ConvTranspose2d, one by bilinear F.interpolate."""

    def __init__(self, cin=3, classes=2, w=8):
        super().__init__()
        self.enc1 = conv_bn_relu(cin, w)
        self.enc2 = conv_bn_relu(w, 2 * w)
        self.mid = conv_bn_relu(2 * w, 4 * w)
        self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)
        self.dec2 = conv_bn_relu(4 * w, 2 * w)
        self.reduce1 = nn.Conv2d(2 * w, w, 1)
        self.dec1 = conv_bn_relu(2 * w, w)
        self.out = nn.Conv2d(w, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        u1 = F.interpolate(self.reduce1(d2), scale_factor=2.0, mode="bilinear", align_corners=False)
        d1 = self.dec1(torch.cat([u1, e1], 1))
        return self.out(d1)


class DetectionHead(nn.Module):
    """A conv head predicting one box and score per cell of an 8x8 grid, then NMS."""

    def __init__(self, cin=8, w=16, iou=0.28):
        super().__init__()
        self.body = nn.Sequential(conv_bn_relu(cin, w), conv_bn_relu(w, w))
        self.box = nn.Conv2d(w, 4, 1)
        self.score = nn.Conv2d(w, 1, 1)
        self.iou = iou
        ys, xs = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
        self.register_buffer("centers", torch.stack([xs, ys], -1).reshape(-1, 2) * 4.0 + 2.0)

    def forward(self, features):
        # features: (1, C, 8, 8). Boxes (x1, y1, x2, y2) around each cell's centre (cells 4
        # apart), about 8 wide, sized by the head so that neighbours overlap by varying
        # amounts and NMS suppresses some of them; scores spread over (0, 1).
        h = self.body(features)
        deltas = self.box(h)[0].reshape(4, -1).t()
        size = torch.exp(deltas[:, 2:]) * 8.0
        centre = self.centers + deltas[:, :2]
        boxes = torch.cat([centre - size / 2, centre + size / 2], 1)
        scores = torch.sigmoid(4.0 * self.score(h)).reshape(-1)
        keep = torchvision.ops.nms(boxes, scores, self.iou)
        return boxes[keep], scores[keep], keep


def vision_transformer():
    return torchvision.models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
        num_classes=10,
    )


def mobilenet_v3():
    return torchvision.models.mobilenet_v3_small(weights=None, width_mult=0.25, num_classes=10)


def efficientnet():
    settings, last_channel = tv_efficientnet._efficientnet_conf(
        "efficientnet_b0", width_mult=0.25, depth_mult=0.25
    )
    return tv_efficientnet.EfficientNet(settings, 0.2, last_channel=last_channel, num_classes=10)


# ---------------------------------------------------------------------------------------------
# The cases.
# ---------------------------------------------------------------------------------------------


def normal_input(name, shape):
    return {"name": name, "dtype": "float32", "shape": list(shape), "dist": "normal"}


def int_input(name, shape, high):
    return {"name": name, "dtype": "int64", "shape": list(shape), "dist": "integers", "low": 0, "high": high}


# Each: (name, builder, opsets, example inputs as specs, runs, dynamic axes, output names,
# description, tolerance). `runs` lists the input sets the golden case checks; a model with
# a symbolic axis is checked at two sizes from one built net.
CASES = [
    dict(
        name="torch_resnet",
        build=SmallResNet,
        opsets=(17, 11),
        runs=[[normal_input("image", (1, 3, 64, 64))]],
        output_names=["logits"],
        description="ResNet-18 structure at width 8-32 (7x7 stem, MaxPool, four BasicBlock stages with "
        "1x1 downsample, global average pool, Linear), hand-written torch module",
    ),
    dict(
        name="torch_resnet_dynamic_batch",
        build=SmallResNet,
        opsets=(13,),
        runs=[[normal_input("image", (1, 3, 32, 32))], [normal_input("image", (3, 3, 32, 32))]],
        dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
        output_names=["logits"],
        description="The small ResNet with a symbolic batch axis, run at batch 1 and batch 3 from "
        "one built net",
    ),
    dict(
        name="torchvision_mobilenet_v3_small",
        build=mobilenet_v3,
        opsets=(17, 12),
        runs=[[normal_input("image", (1, 3, 64, 64))]],
        output_names=["logits"],
        description="torchvision mobilenet_v3_small(width_mult=0.25, num_classes=10): HardSwish, "
        "squeeze-excite with HardSigmoid, depthwise convs",
    ),
    dict(
        name="torchvision_efficientnet",
        build=efficientnet,
        opsets=(17, 12),
        runs=[[normal_input("image", (1, 3, 64, 64))]],
        output_names=["logits"],
        description="torchvision EfficientNet-B0 config at width_mult=0.25, depth_mult=0.25: SiLU, "
        "MBConv with squeeze-excite",
    ),
    dict(
        name="torchvision_vit",
        build=vision_transformer,
        # Not at opset 11/12: torchvision's ViT uses aten::unflatten, which the TorchScript
        # exporter supports from opset 13 only.
        opsets=(17,),
        runs=[[normal_input("image", (1, 3, 32, 32))]],
        output_names=["logits"],
        description="torchvision VisionTransformer(image 32, patch 8, 2 layers, 2 heads, hidden 32, "
        "mlp 64): patch Conv, class token, MultiheadAttention, GELU, LayerNorm",
    ),
    dict(
        name="torch_bert_encoder",
        build=BertStyle,
        opsets=(17, 12),
        runs=[[int_input("ids", (2, 12), 64)], [int_input("ids", (3, 7), 64)]],
        dynamic_axes={"ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}},
        output_names=["logits"],
        description="BERT-style encoder: token and position embeddings, 2 post-norm layers of "
        "multi-head self-attention (4 heads) and GELU feed-forward, with symbolic batch and sequence axes, so its Reshape shapes are computed "
        "from Shape; run at (2, 12) and (3, 7)",
    ),
    dict(
        name="torch_lstm_lm",
        build=lambda: RecurrentLM("lstm", bidirectional=True),
        opsets=(17, 11),
        runs=[[int_input("ids", (9, 2), 40)]],
        output_names=["logits"],
        description="LSTM language model: Embedding, 2-layer bidirectional nn.LSTM, Linear",
    ),
    dict(
        name="torch_gru_lm",
        build=lambda: RecurrentLM("gru"),
        opsets=(17, 12),
        runs=[[int_input("ids", (9, 2), 40)]],
        output_names=["logits"],
        description="GRU language model: Embedding, 2-layer nn.GRU, Linear",
    ),
    dict(
        name="torch_unet",
        build=SmallUNet,
        opsets=(17, 11),
        runs=[[normal_input("image", (1, 3, 32, 32))]],
        output_names=["mask"],
        description="Two-level U-Net: Conv-BN-ReLU blocks, MaxPool, ConvTranspose2d up path, "
        "bilinear F.interpolate (Resize) up path, skip Concats",
    ),
    dict(
        name="torch_detection_nms",
        build=DetectionHead,
        opsets=(17, 11),
        runs=[[normal_input("features", (1, 8, 8, 8))]],
        output_names=["boxes", "scores", "keep"],
        description="Detection head: conv body, per-cell boxes and sigmoid scores, torchvision.ops.nms "
        "(NonMaxSuppression) and a Gather of the kept boxes",
    ),
]


def example_inputs(run):
    # Export traces with zeros of the first run's shapes; the golden inputs come from numpy.
    tensors = []
    for spec in run:
        dtype = torch.float32 if spec["dtype"] == "float32" else torch.int64
        tensors.append(torch.zeros(spec["shape"], dtype=dtype))
    return tuple(tensors)


def export_one(case, opset):
    seed = seed_for(case["name"])
    torch.manual_seed(seed)
    model = case["build"]()
    # torch's default Linear initialisation (uniform in +-1/sqrt(fan_in)) for every Linear:
    # torchvision zeroes ViT's head and gives MobileNet's classifier std 0.01, which would
    # leave logits that are all zero or ~1e-4, checking nothing.
    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.reset_parameters()
    randomise_batchnorm(model, torch.Generator().manual_seed(seed))
    model.eval()
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            example_inputs(case["runs"][0]),
            buffer,
            dynamo=False,
            opset_version=opset,
            input_names=[s["name"] for s in case["runs"][0]],
            output_names=case["output_names"],
            dynamic_axes=case.get("dynamic_axes"),
            do_constant_folding=True,
        )
    if isinstance(model, DetectionHead):
        nms_margins(model, case, name_for(case, opset))
    return buffer.getvalue()


def name_for(case, opset):
    return case["name"] if opset == case["opsets"][0] else f"{case['name']}_opset{opset}"


def nms_margins(model, case, name):
    """Fails unless every NMS decision on the golden input is far from its threshold, so f32
    rounding differences between implementations cannot flip a suppression or swap two scores.

    The input is made exactly as generate.py makes it (numpy default_rng(crc32(name)), standard
    normal, f32); the boxes and scores are computed in float64.
    """
    spec = case["runs"][0][0]
    rng = np.random.default_rng(zlib.crc32(name.encode("utf-8")))
    features = torch.from_numpy(rng.standard_normal(tuple(spec["shape"])).astype(np.float32))
    m = copy.deepcopy(model).double()
    with torch.no_grad():
        h = m.body(features.double())
        deltas = m.box(h)[0].reshape(4, -1).t()
        size = torch.exp(deltas[:, 2:]) * 8.0
        centre = m.centers + deltas[:, :2]
        boxes = torch.cat([centre - size / 2, centre + size / 2], 1)
        scores = torch.sigmoid(4.0 * m.score(h)).reshape(-1)
        iou = torchvision.ops.box_iou(boxes, boxes)
    off_diagonal = ~torch.eye(len(boxes), dtype=torch.bool)
    iou_margin = (iou[off_diagonal] - model.iou).abs().min().item()
    ordered = torch.sort(scores).values
    score_gap = (ordered[1:] - ordered[:-1]).min().item()
    kept = len(torchvision.ops.nms(boxes, scores, model.iou))
    print(f"  {name}: NMS keeps {kept} of {len(boxes)}; closest IoU to the threshold is "
          f"{iou_margin:.2e} away, smallest score gap {score_gap:.2e}")
    if iou_margin < 1e-4 or score_gap < 1e-5 or not 0 < kept < len(boxes):
        raise SystemExit(f"{name}: NMS decisions too close to their thresholds or trivial")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="the directory to write (conformance/golden/exported)")
    args = parser.parse_args()
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for case in CASES:
        for opset in case["opsets"]:
            name = name_for(case, opset)
            model = export_one(case, opset)
            if export_one(case, opset) != model:
                raise SystemExit(f"{name}: two exports gave different bytes")
            case_dir = out / name
            case_dir.mkdir()
            (case_dir / "model.onnx").write_bytes(model)
            spec = {
                "name": name,
                "description": case["description"] + f" (opset {opset})",
                "opset": opset,
                "tolerance": case.get("tolerance", "composite"),
                "runs": case["runs"],
                "exporter": f"torch {torch.__version__} torch.onnx.export(dynamo=False), "
                f"torchvision {torchvision.__version__}",
                "seed": seed_for(case["name"]),
            }
            (case_dir / "spec.json").write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            print(f"  exported {name} (opset {opset}, {len(model)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
