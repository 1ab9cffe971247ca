"""_onnxmeta.py — an ONNX model's graph inputs and outputs as the file
declares them (names, element types, dims with their dim_params), read from
the protobuf wire format directly: no onnx package needed, the weights
skipped without being decoded.  InferenceSession.get_inputs() reports these
(onnxruntime's NodeArg: int64 inputs are tensor(int64) though harp computes
them in int32), and a session whose dims are dynamic compiles per binding.

Needs: nothing.  Gives: read(data) -> Meta (or None when data is not an ONNX model).
"""

ELEM_TYPES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
              9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 16: "bfloat16"}


class Value:
    """A graph input or output: name, elem (ONNX element type number), dims (int, str dim_param, or None)."""

    def __init__(self, name, elem, dims):
        self.name, self.elem, self.dims = name, elem, dims

    @property
    def type(self):
        return f"tensor({ELEM_TYPES.get(self.elem, 'undefined')})"

    @property
    def dynamic(self):
        return self.dims is None or any(not isinstance(d, int) for d in self.dims)


class Meta:
    def __init__(self, inputs, outputs, external):
        self.inputs, self.outputs, self.external = inputs, outputs, external


def _varint(b, i):
    v = shift = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, i
        shift += 7
        if shift > 70:
            raise ValueError("bad varint")


def _fields(b):
    """(field number, wire type, value) of each field of message b: a varint's int, a LEN's memoryview."""
    i, n = 0, len(b)
    while i < n:
        key, i = _varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            ln, i = _varint(b, i)
            if i + ln > n:
                raise ValueError("truncated field")
            v, i = b[i:i + ln], i + ln
        elif wt == 1:
            v, i = None, i + 8
        elif wt == 5:
            v, i = None, i + 4
        else:
            raise ValueError("unsupported wire type")
        yield f, wt, v


def _signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def _value_info(b):
    name, elem, dims = "", 0, None
    for f, wt, v in _fields(b):
        if f == 1 and wt == 2:
            name = bytes(v).decode("utf-8", "replace")
        elif f == 2 and wt == 2:  # TypeProto
            for tf, twt, tv in _fields(v):
                if tf != 1 or twt != 2:  # tensor_type
                    continue
                for sf, swt, sv in _fields(tv):
                    if sf == 1 and swt == 0:
                        elem = sv
                    elif sf == 2 and swt == 2:  # TensorShapeProto
                        dims = []
                        for df, dwt, dv in _fields(sv):
                            if df != 1 or dwt != 2:
                                continue
                            d = None
                            for xf, xwt, xv in _fields(dv):
                                if xf == 1 and xwt == 0:
                                    d = _signed(xv) if _signed(xv) >= 0 else None  # -1: unknown, as onnxruntime shows it
                                elif xf == 2 and xwt == 2:
                                    d = bytes(xv).decode("utf-8", "replace")
                            dims.append(d)
    return Value(name, elem, dims)


def read(data):
    """The graph's inputs (initializers excluded) and outputs, or None when data does not parse as ONNX."""
    try:
        b = memoryview(data)
        graph = None
        for f, wt, v in _fields(b):
            if f == 7 and wt == 2:
                graph = v
        if graph is None:
            return None
        inputs, outputs, inits, external = [], [], set(), False
        for f, wt, v in _fields(graph):
            if f == 11 and wt == 2:
                inputs.append(_value_info(v))
            elif f == 12 and wt == 2:
                outputs.append(_value_info(v))
            elif f == 5 and wt == 2:  # an initializer: its name, whether its data lies outside
                for tf, twt, tv in _fields(v):
                    if tf == 8 and twt == 2:
                        inits.add(bytes(tv).decode("utf-8", "replace"))
                    elif tf == 14 and twt == 0 and tv == 1:
                        external = True
        return Meta([x for x in inputs if x.name not in inits], outputs, external)
    except (ValueError, IndexError):
        return None
