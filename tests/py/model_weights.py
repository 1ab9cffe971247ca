"""Random weights for the whole-model tests and benchmarks (numpy only, so
bench/e2e.py can use it without onnx).  Each generator takes the caller's
rand(*shape, scale=...) so every script keeps its own seeded stream."""


def resnet18_weights(rand, widths=(64, 128, 256, 512), classes=1000):
    """Weights named like bench/models/resnet18.harp's parameters (batch norm
    folded into the conv biases); He-scaled so activations stay O(1).  The
    classifier wf is [features, classes]."""
    t = {"w0": rand(widths[0], 3, 7, 7, scale=(2 / 147) ** 0.5), "b0": rand(widths[0], scale=0.1)}
    c = widths[0]
    for st, d in enumerate(widths, 1):
        for blk in "ab":
            cin = c if blk == "a" else d
            t[f"l{st}{blk}1"] = rand(d, cin, 3, 3, scale=(2 / (9 * cin)) ** 0.5)
            t[f"c{st}{blk}1"] = rand(d, scale=0.1)
            t[f"l{st}{blk}2"] = rand(d, d, 3, 3, scale=(1 / (9 * d)) ** 0.5)
            t[f"c{st}{blk}2"] = rand(d, scale=0.1)
            if st > 1 and blk == "a":
                t[f"l{st}ad"] = rand(d, c, 1, 1, scale=c ** -0.5)
                t[f"c{st}ad"] = rand(d, scale=0.1)
        c = d
    t["wf"], t["bf"] = rand(c, classes, scale=c ** -0.5), rand(classes, scale=0.1)
    return t


def bert_weights(rand, E, F, layers=1):
    """bert()'s weights for `layers` layers from rand(*shape, scale=...): He-scaled matrices, small biases,
    layernorm gains near 1."""
    t = {}
    for l in range(layers):
        for n, shape in (("wq", (E, E)), ("wk", (E, E)), ("wv", (E, E)), ("wo", (E, E)), ("w1", (E, F)), ("w2", (F, E))):
            t[f"{n}{l}"] = rand(*shape, scale=shape[0] ** -0.5)
        for n, d in (("bq", E), ("bk", E), ("bv", E), ("bo", E), ("b1", F), ("b2", E), ("lb1", E), ("lb2", E)):
            t[f"{n}{l}"] = rand(d, scale=0.1)
        t[f"g1{l}"], t[f"g2{l}"] = 1 + rand(E, scale=0.1), 1 + rand(E, scale=0.1)
    return t


def mobilenetv2_weights(rand, blocks, c0, last, classes):
    """onnx_models.mobilenetv2()'s weights for blocks (mobilenetv2_blocks' (in, expanded, out, stride)):
    a stem of c0 channels, the blocks, a last 1x1 conv to `last` channels, a classifier of `classes`;
    He-scaled, small biases."""
    t = {"w0": rand(c0, 3, 3, 3, scale=(2 / 27) ** 0.5), "b0": rand(c0, scale=0.1)}
    for i, (c, e, d, _) in enumerate(blocks, 1):
        if e != c:
            t[f"e{i}"], t[f"eb{i}"] = rand(e, c, 1, 1, scale=(2 / c) ** 0.5), rand(e, scale=0.1)
        t[f"d{i}"], t[f"db{i}"] = rand(e, 1, 3, 3, scale=(2 / 9) ** 0.5), rand(e, scale=0.1)
        t[f"p{i}"], t[f"pb{i}"] = rand(d, e, 1, 1, scale=(1 / e) ** 0.5), rand(d, scale=0.1)
    d = blocks[-1][2]
    t["wl"], t["bl"] = rand(last, d, 1, 1, scale=(2 / d) ** 0.5), rand(last, scale=0.1)
    t["wf"], t["bf"] = rand(last, classes, scale=last ** -0.5), rand(classes, scale=0.1)
    return t
