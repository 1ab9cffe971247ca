#!/usr/bin/env python3
"""torch_export.py — models of the corpus made by a real converter:
torchvision and Hugging Face transformers models (classifiers, a
segmenter, two detectors with NonMaxSuppression and RoiAlign, text and
speech encoders, decoders with past key/values), built from a local
configuration with seeded random weights (nothing is downloaded), exported
by torch.onnx.export.

    PY tests/realmodels/recipes/torch_export.py OUT.onnx NAME

Needs: torch==2.9.1, torchvision==0.24.1, transformers==4.57.1, onnxscript
(for the dynamo exporter) and, for mobilenet_v3_fp16, onnxconverter-common==1.16.0
in PY; exits 3 when one is missing (fetch.py then
reports the model unavailable).  Gives: OUT.onnx.  NAME is one of MODELS.

The torchvision models' batch norms hold the statistics of random batches
(calibrated).  Each export uses the TorchScript exporter (dynamo=False, opset 17) with the
dims a user would mark dynamic, except resnet18_dynamo, which uses the
torch.export-based exporter (dynamo=True, opset 18) that torch 2.9 makes the
default.  mobilenet_v3_fp16 is the same export halved by onnxconverter-common
(float16 weights, activations, inputs and outputs).  The bytes are reproducible at these versions (fetch.py checks
their sha256).
"""
import os
import sys

try:
    import torch
    import torchvision
    import transformers
except ImportError as e:
    print(f"converter missing: {e}", file=sys.stderr)
    sys.exit(3)

OPSET = 17


def export(model, args, out, names_in, names_out, dynamic):
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, out, input_names=names_in, output_names=names_out,
                          dynamic_axes=dynamic, opset_version=OPSET, dynamo=False, do_constant_folding=True)


def calibrated(m, shape):
    """m with its batch norms' running statistics set to the batch
    statistics of a few random batches of `shape`, as training leaves them:
    torchvision's fresh statistics (mean 0, variance 1) let the activations
    of a random MobileNet fade to 1e-10 by the logits."""
    for b in m.modules():
        if isinstance(b, torch.nn.BatchNorm2d):
            b.reset_running_stats()
            b.momentum = None  # a cumulative average
    m.train()
    with torch.no_grad():
        for _ in range(4):
            m(torch.randn(*shape))
    return m.eval()


def mobilenet_v3(out):
    m = calibrated(torchvision.models.mobilenet_v3_large(weights=None), (8, 3, 224, 224))
    export(m, (torch.randn(1, 3, 224, 224),), out, ["input"], ["logits"], {"input": {0: "batch"}, "logits": {0: "batch"}})


class SegOut(torch.nn.Module):
    """The "out" entry of a torchvision segmentation model's dict."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)["out"]


def lraspp(out):
    m = torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=21)
    m = calibrated(m, (4, 3, 224, 224))
    dyn = {"input": {0: "batch", 2: "height", 3: "width"}, "out": {0: "batch", 2: "height", 3: "width"}}
    export(SegOut(m), (torch.randn(1, 3, 224, 224),), out, ["input"], ["out"], dyn)


def resnet18_dynamo(out):
    m = calibrated(torchvision.models.resnet18(weights=None), (8, 3, 224, 224))
    batch = torch.export.Dim("batch", min=1, max=64)
    with torch.no_grad():
        prog = torch.onnx.export(m, (torch.randn(2, 3, 224, 224),), None, input_names=["input"], output_names=["logits"],
                                 dynamic_shapes={"x": {0: batch}}, opset_version=18, dynamo=True)
    prog.save(out, external_data=False)


def bert(out):
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                  intermediate_size=1024, max_position_embeddings=512)
    m = transformers.BertModel(cfg)
    ids = torch.randint(0, cfg.vocab_size, (1, 16))
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dyn = {n: {0: "batch", 1: "sequence"} for n in names}
    dyn.update({"last_hidden_state": {0: "batch", 1: "sequence"}, "pooler_output": {0: "batch"}})
    m.config.return_dict = False
    export(m, (ids, torch.ones_like(ids), torch.zeros_like(ids)), out, names, ["last_hidden_state", "pooler_output"], dyn)


class WithPast(torch.nn.Module):
    """A causal LM called as a decoder step: (input_ids, attention_mask,
    past key and value of each layer) -> (logits, present key and value of
    each layer), the past as flat tensors [batch, heads, past, head_dim]."""

    def __init__(self, m, layers):
        super().__init__()
        self.m, self.layers = m, layers

    def forward(self, input_ids, attention_mask, *past):
        from transformers.cache_utils import DynamicCache
        cache = DynamicCache()
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        o = self.m(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
        flat = []
        for i in range(self.layers):
            layer = o.past_key_values.layers[i]
            flat += [layer.keys, layer.values]
        return (o.logits, *flat)


def causal_lm(out, m, layers, kv_heads, head_dim):
    # transformers builds the causal mask with torch.vmap, which the
    # TorchScript exporter cannot trace; its own mask for older torch (the
    # one optimum's exporter patches in) is the same mask without vmap
    import transformers.masking_utils as mu
    mu.sdpa_mask = mu.sdpa_mask_older_torch
    mu.ALL_MASK_ATTENTION_FUNCTIONS._global_mapping["sdpa"] = mu.sdpa_mask_older_torch
    w = WithPast(m, layers)
    past_len, batch = 4, 1
    past = []
    names_in, names_out = ["input_ids", "attention_mask"], ["logits"]
    # one token a step: the trace fixes the position ids' shape to it
    dyn = {"input_ids": {0: "batch"}, "attention_mask": {0: "batch", 1: "past_sequence+1"}, "logits": {0: "batch"}}
    for i in range(layers):
        for kv in ("key", "value"):
            past.append(torch.randn(batch, kv_heads, past_len, head_dim))
            names_in.append(f"past_key_values.{i}.{kv}")
            names_out.append(f"present.{i}.{kv}")
            dyn[names_in[-1]] = {0: "batch", 2: "past_sequence"}
            dyn[names_out[-1]] = {0: "batch", 2: "past_sequence+1"}
    ids = torch.randint(0, m.config.vocab_size, (batch, 1))
    export(w, (ids, torch.ones(batch, past_len + 1, dtype=torch.int64), *past), out, names_in, names_out, dyn)


def gpt2_past(out):
    cfg = transformers.GPT2Config(vocab_size=50257, n_positions=1024, n_embd=256, n_layer=4, n_head=4)
    causal_lm(out, transformers.GPT2LMHeadModel(cfg), 4, 4, 64)


def llama_past(out):
    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                                   num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048)
    causal_lm(out, transformers.LlamaForCausalLM(cfg), 4, 2, 32)


def wav2vec2(out):
    cfg = transformers.Wav2Vec2Config(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                                      conv_dim=(256,) * 7)
    m = transformers.Wav2Vec2Model(cfg)
    m.config.return_dict = False

    class Hidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)[0]

    dyn = {"input_values": {0: "batch", 1: "samples"}, "last_hidden_state": {0: "batch", 1: "frames"}}
    export(Hidden(), (torch.randn(1, 16000),), out, ["input_values"], ["last_hidden_state"], dyn)


def fp16(out, make):
    """The model `make` exports, converted to float16 throughout, inputs and
    outputs too, by onnxconverter-common (as users halve exported models)."""
    import onnx
    try:
        from onnxconverter_common import float16
    except ImportError as e:
        print(f"converter missing: {e}", file=sys.stderr)
        sys.exit(3)
    make(out + ".fp32")
    m = float16.convert_float_to_float16(onnx.load(out + ".fp32"), keep_io_types=False)
    os.unlink(out + ".fp32")
    onnx.save(m, out)


def mobilenet_v3_fp16(out):
    fp16(out, mobilenet_v3)


class Detect(torch.nn.Module):
    """A torchvision detector on one image [3, H, W] -> (boxes, scores,
    labels): its transform, backbone, heads, the per-class
    NonMaxSuppression and TopK of a run-time count, as the exporter writes
    them."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        o = self.m([x])[0]
        return o["boxes"], o["scores"], o["labels"]


def detector(out, m):
    m.eval()
    export(Detect(m), (torch.rand(3, 320, 320),), out, ["images"], ["boxes", "scores", "labels"], None)


def ssdlite(out):
    detector(out, torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=11))


def fasterrcnn(out):
    detector(out, torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None,
                                                                                       num_classes=11))


MODELS = {f.__name__: f for f in (mobilenet_v3, lraspp, resnet18_dynamo, bert, gpt2_past, llama_past, wav2vec2,
                                  mobilenet_v3_fp16, ssdlite, fasterrcnn)}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in MODELS:
        raise SystemExit(f"usage: {sys.argv[0]} OUT.onnx {{{','.join(MODELS)}}}")
    want = {"torch": "2.9.1", "torchvision": "0.24.1", "transformers": "4.57.1"}
    have = {"torch": torch.__version__, "torchvision": torchvision.__version__, "transformers": transformers.__version__}
    for k, v in want.items():
        if have[k].split("+")[0] != v:
            print(f"warning: {k} {have[k]}, the recipe pins {v}: the bytes may differ", file=sys.stderr)
    torch.manual_seed(0)
    out = sys.argv[1]
    tmp = out + ".part"
    MODELS[sys.argv[2]](tmp)
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
