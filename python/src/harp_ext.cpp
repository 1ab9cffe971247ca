// harp_ext.cpp — harp._harp: the thin layer of the Python package over
// libharp.so (harp.h).  Python does the checking and the conveniences
// (harp/session.py); this file compiles and tunes (the GIL released, the
// progress callback and Ctrl-C checked between stages), describes the
// compiled model, and runs instances on buffers (the GIL released).  Errors become
// the exception classes of harp/_errors.py, built from the harp_error.
// Needs: harp.h (libharp.so), nanobind.  Gives: the module harp._harp.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <cstdint>

#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <vector>

#include "harp.h"

namespace nb = nanobind;

// Text from the library as str: a model's bytes may not be UTF-8 (replaced, never an error).
static nb::object text(const char *p) {
  PyObject *o = PyUnicode_DecodeUTF8(p ? p : "", (Py_ssize_t)strlen(p ? p : ""), "replace");
  if (!o) throw nb::python_error();
  return nb::steal(o);
}

// Raise e as harp._errors' class for its code (node, file, line, col attached).
[[noreturn]] static void raise_harp(const harp_error &e) {
  nb::object make = nb::module_::import_("harp._errors").attr("_make");
  nb::object exc = make(harp_status_name(e.code), text(e.msg), text(e.node), text(e.file), e.line, e.col, text(e.snippet));
  PyErr_SetObject((PyObject *)Py_TYPE(exc.ptr()), exc.ptr());
  throw nb::python_error();
}

// The compile's progress: the Python callback (may be None) and what
// stopped the compile (an exception it raised, or Ctrl-C), kept while
// the GIL is released.
struct Progress {
  nb::object fn;
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
};

// p's callback called with args (the GIL taken): 1 to stop when Ctrl-C is
// pending or the callback raises (kept in p) or returns true, else 0.
template <typename... A> static int call_progress(Progress *p, A... args) {
  nb::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) {
    PyErr_Fetch(&p->type, &p->value, &p->tb);
    return 1;
  }
  if (!p->fn.is_valid() || p->fn.is_none()) return 0;
  try {
    return nb::bool_(p->fn(args...)) ? 1 : 0;
  } catch (nb::python_error &err) {
    err.restore();
    PyErr_Fetch(&p->type, &p->value, &p->tb);
    return 1;
  }
}

// Each stage's end: call_progress(stage, fraction); 1 cancels the compile
// (HARP_E_CANCELLED).
static int on_progress(void *ctx, const char *stage, double fraction) {
  return call_progress(static_cast<Progress *>(ctx), stage, fraction);
}

static std::vector<const char *> cstrs(const std::vector<std::string> &v) {
  std::vector<const char *> out;
  for (const auto &s : v) out.push_back(s.c_str());
  out.push_back(nullptr);
  return out;
}

struct Compiled {
  harp_compiled *c = nullptr;
  Compiled() = default;
  Compiled(const Compiled &) = delete;
  ~Compiled() { // frees c, which waits for a background build (tier 0): the GIL released meanwhile
    if (PyGILState_Check()) {
      nb::gil_scoped_release nogil;
      harp_compiled_free(c);
    } else {
      harp_compiled_free(c);
    }
  }
};

// Compile source (a path: str, or the model's bytes with fmt) with the
// options; progress(stage, fraction) after each stage.  tier0: a CPU
// compile returns once tier 0 can run (the knob tier0 at auto; the
// progress sees the stages before that: harp_options.progress_tier0).
static Compiled *compile(nb::object source, const std::string &fmt, const std::string &name, const std::string &backend,
                         const std::vector<std::string> &shapes, const std::vector<std::string> &syms,
                         const std::vector<std::string> &knobs, const std::vector<std::string> &params,
                         const std::string &target, const std::string &cache_dir,
                         const std::string &precision, int64_t max_memory, nb::object progress,
                         const std::vector<std::string> &shapesets, bool shapeset_recompile, bool tier0) {
  harp_options o{};
  if (backend == "cpu") o.backend = HARP_BACKEND_CPU;
  else if (backend == "interp") o.backend = HARP_BACKEND_INTERP;
  else if (backend == "cuda") o.backend = HARP_BACKEND_CUDA;
  else throw nb::value_error(("unknown backend \"" + backend + "\" (cpu, cuda or interp)").c_str());
  auto sh = cstrs(shapes), sy = cstrs(syms), kn = cstrs(knobs), pa = cstrs(params), ss = cstrs(shapesets);
  o.shapes = sh.data(), o.syms = sy.data(), o.knobs = kn.data(), o.params = pa.data();
  static const char *const exact[] = {"exact", nullptr}; /* no box named: the binding alone (the session tiers its boxes) */
  o.shapesets = shapesets.empty() ? exact : ss.data(), o.shapeset_recompile = shapeset_recompile;
  o.progress_tier0 = tier0;
  o.target = target.empty() ? nullptr : target.c_str();
  o.cache_dir = cache_dir.empty() ? nullptr : cache_dir.c_str();
  o.precision = precision.empty() ? nullptr : precision.c_str();
  o.max_memory = max_memory;
  Progress p;
  p.fn = progress;
  o.progress = on_progress, o.progress_ctx = &p;
  harp_error e{};
  harp_status st;
  auto *out = new Compiled();
  if (PyBytes_Check(source.ptr())) {
    char *data;
    Py_ssize_t len;
    PyBytes_AsStringAndSize(source.ptr(), &data, &len);
    nb::gil_scoped_release nogil;
    st = harp_compile_buffer(&e, data, (size_t)len, fmt.c_str(), name.c_str(), &o, &out->c);
  } else {
    std::string path = nb::cast<std::string>(nb::str(source));
    nb::gil_scoped_release nogil;
    st = harp_compile_file(&e, path.c_str(), &o, &out->c);
  }
  if (!st) return out;
  delete out;
  if (p.type) { // the callback's exception, or KeyboardInterrupt
    PyErr_Restore(p.type, p.value, p.tb);
    throw nb::python_error();
  }
  if (PyErr_CheckSignals() != 0) throw nb::python_error(); // Ctrl-C that killed the C compiler
  raise_harp(e);
}

static nb::tuple shape_tuple(const int64_t *shape, int rank) {
  nb::list l;
  for (int d = 0; d < rank; d++) l.append(shape[d]);
  return nb::tuple(l);
}

// (harp's name, the file's name, dtype code, shape) of input / output k.
static nb::tuple info(const Compiled &c, bool out, int k) {
  int n = out ? harp_num_outputs(c.c) : harp_num_inputs(c.c);
  if (k < 0 || k >= n) throw nb::index_error();
  int64_t shape[HARP_MAX_RANK];
  int rank = out ? harp_output_shape(c.c, k, shape) : harp_input_shape(c.c, k, shape);
  return nb::make_tuple(text(out ? harp_output_name(c.c, k) : harp_input_name(c.c, k)),
                        text(out ? harp_output_source_name(c.c, k) : harp_input_source_name(c.c, k)),
                        (int)(out ? harp_output_dtype(c.c, k) : harp_input_dtype(c.c, k)), shape_tuple(shape, rank));
}

// A buffer view of each object (C-contiguous; writable for outputs), released on scope exit.
struct Views {
  std::vector<Py_buffer> v;
  ~Views() {
    for (auto &b : v) PyBuffer_Release(&b);
  }
  void *take(nb::handle h, bool writable, size_t want, const char *what, size_t k) {
    Py_buffer b;
    if (PyObject_GetBuffer(h.ptr(), &b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) != 0) throw nb::python_error();
    v.push_back(b);
    if ((size_t)b.len != want)
      throw nb::value_error((std::string(what) + " " + std::to_string(k) + " has " + std::to_string(b.len) +
                             " bytes, the model takes " + std::to_string(want))
                                .c_str());
    return b.buf;
  }
};

struct Instance {
  nb::object owner; // the Compiled, alive while this is
  const harp_compiled *c = nullptr;
  harp_model *m = nullptr;
  std::mutex mu; // one run at a time on this instance
  Instance() = default;
  Instance(const Instance &) = delete;
  ~Instance() { harp_model_free(m); }
};

// The weights of c: params_obj (bytes, the whole block), else the file's
// own, else zeros (kept in *zeros).
static const void *weights_of(const Compiled &c, nb::object params_obj, std::vector<unsigned char> *zeros) {
  size_t nb = harp_params_bytes(c.c);
  const void *params = harp_embedded_params(c.c);
  if (!params_obj.is_none()) {
    if (!PyBytes_Check(params_obj.ptr()) || (size_t)PyBytes_Size(params_obj.ptr()) != nb)
      throw nb::value_error(("the parameter block must be bytes of length " + std::to_string(nb)).c_str());
    params = PyBytes_AsString(params_obj.ptr());
  } else if (nb && !params) { // a .harp / .json model's weights: zero until the caller's (load_params)
    zeros->assign(nb, 0);
    params = zeros->data();
  }
  return params;
}

// An instance on `threads` threads; its weights: weights_of.
static Instance *new_instance(nb::object owner, int threads, int device, nb::object params_obj) {
  Compiled &c = nb::cast<Compiled &>(owner);
  harp_instance_options io{threads, device};
  harp_error e{};
  harp_model *m = nullptr;
  size_t nb = harp_params_bytes(c.c);
  std::vector<unsigned char> zeros;
  const void *params = weights_of(c, params_obj, &zeros);
  harp_status st;
  {
    nb::gil_scoped_release nogil;
    st = harp_model_new(&e, c.c, params, nb, &io, &m);
  }
  if (st) raise_harp(e);
  auto *in = new Instance();
  in->owner = owner, in->c = c.c, in->m = m;
  return in;
}

// The buffers of one call, checked against the model: inputs[k] holds
// in_bytes[k] bytes of dtype dtypes[k]; an output that is None (allowed
// when none_ok) is read after the run (run-time shapes: output()).
struct Call {
  Views views;
  std::vector<const void *> in;
  std::vector<void *> out;
  std::vector<harp_dtype> dt;
  Call(Instance &self, nb::list inputs, const std::vector<int> &dtypes, const std::vector<size_t> &in_bytes,
       nb::list outputs, const std::vector<size_t> &out_bytes, bool none_ok) {
    if (!self.m) throw nb::value_error("the instance is closed");
    size_t ni = (size_t)harp_num_inputs(self.c), no = (size_t)harp_num_outputs(self.c);
    if (inputs.size() != ni || dtypes.size() != ni || in_bytes.size() != ni || outputs.size() != no || out_bytes.size() != no)
      throw nb::value_error("run: the lists do not match the model's inputs and outputs");
    views.v.reserve(ni + no);
    in.resize(ni), out.resize(no), dt.resize(ni);
    for (size_t k = 0; k < ni; k++) {
      in[k] = views.take(inputs[k], false, in_bytes[k], "input", k);
      dt[k] = (harp_dtype)dtypes[k];
    }
    for (size_t k = 0; k < no; k++)
      out[k] = none_ok && outputs[k].is_none() ? nullptr : views.take(outputs[k], true, out_bytes[k], "output", k);
  }
};

static void run(Instance &self, nb::list inputs, const std::vector<int> &dtypes, const std::vector<size_t> &in_bytes,
                nb::list outputs, const std::vector<size_t> &out_bytes) {
  Call call(self, inputs, dtypes, in_bytes, outputs, out_bytes, true);
  harp_error e{};
  harp_status st;
  {
    nb::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(self.mu);
    st = harp_model_run_typed(&e, self.m, call.in.data(), call.dt.data(), call.out.data());
  }
  if (st) raise_harp(e);
}

// A run on device memory (a CUDA instance): in / out are CUdeviceptr values
// the Python layer checked (dtype, shape, device), stream a CUstream (0:
// the instance's own).  Only enqueued: harp_model_run_device's rules.
static void run_device(Instance &self, const std::vector<uint64_t> &in, const std::vector<uint64_t> &out, uint64_t stream) {
  if (!self.m) throw nb::value_error("the instance is closed");
  if (in.size() != (size_t)harp_num_inputs(self.c) || out.size() != (size_t)harp_num_outputs(self.c))
    throw nb::value_error("run_device: the lists do not match the model's inputs and outputs");
  std::vector<const void *> ip(in.size() + 1);
  std::vector<void *> op(out.size() + 1);
  for (size_t k = 0; k < in.size(); k++) ip[k] = reinterpret_cast<const void *>((uintptr_t)in[k]);
  for (size_t k = 0; k < out.size(); k++) op[k] = reinterpret_cast<void *>((uintptr_t)out[k]);
  harp_error e{};
  harp_status st;
  {
    nb::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(self.mu);
    st = harp_model_run_device(&e, self.m, ip.data(), op.data(), reinterpret_cast<void *>((uintptr_t)stream));
  }
  if (st) raise_harp(e);
}
// The C API's own time for n runs on these buffers (bench/python_overhead.py): seconds.
static double time_runs(Instance &self, nb::list inputs, const std::vector<int> &dtypes, const std::vector<size_t> &in_bytes,
                        nb::list outputs, const std::vector<size_t> &out_bytes, int n) {
  Call call(self, inputs, dtypes, in_bytes, outputs, out_bytes, false);
  harp_error e{};
  harp_status st = HARP_OK;
  struct timespec t0, t1;
  {
    nb::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(self.mu);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n && !st; i++) st = harp_model_run_typed(&e, self.m, call.in.data(), call.dt.data(), call.out.data());
    clock_gettime(CLOCK_MONOTONIC, &t1);
  }
  if (st) raise_harp(e);
  return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

// Output k as the instance holds it after a run (run-time shapes): (bytes, shape), or None.
static nb::object output(Instance &self, int k) {
  if (!self.m) throw nb::value_error("the instance is closed");
  int64_t shape[HARP_MAX_RANK];
  int rank = 0;
  const void *p = harp_model_output(self.m, k, shape, &rank);
  if (!p) return nb::none();
  size_t n = 1;
  for (int d = 0; d < rank; d++) n *= (size_t)shape[d];
  static const size_t size[] = {2, 2, 4, 4, 1, 1, 1}; // fp16 bf16 fp32 i32 bool i8 u8
  harp_dtype dt = harp_output_dtype(self.c, k);
  n *= (int)dt < 7 ? size[dt] : 1;
  return nb::make_tuple(nb::bytes(static_cast<const char *>(p), n), shape_tuple(shape, rank));
}

// A ShapeSet model's run (harp_model_run_shaped): inputs[k] (C-contiguous,
// of the model's dtype) at shapes[k]; the outputs are read with output().
static void run_shaped(Instance &self, nb::list inputs, const std::vector<std::vector<int64_t>> &shapes) {
  if (!self.m) throw nb::value_error("the instance is closed");
  size_t ni = (size_t)harp_num_inputs(self.c);
  if (inputs.size() != ni || shapes.size() != ni) throw nb::value_error("run_shaped: the lists do not match the model's inputs");
  Views views;
  views.v.reserve(ni);
  std::vector<const void *> in(ni);
  std::vector<const int64_t *> sh(ni);
  for (size_t k = 0; k < ni; k++) {
    size_t want = 1;
    for (int64_t d : shapes[k]) want *= (size_t)d;
    static const size_t size[] = {2, 2, 4, 4, 1, 1, 1};
    harp_dtype dt = harp_input_dtype(self.c, (int)k);
    in[k] = views.take(inputs[k], false, want * ((int)dt < 7 ? size[dt] : 1), "input", k);
    sh[k] = shapes[k].data();
  }
  harp_error e{};
  harp_status st;
  {
    nb::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(self.mu);
    st = harp_model_run_shaped(&e, self.m, in.data(), sh.data(), nullptr);
  }
  if (st) raise_harp(e);
}

// The tuner's progress: progress(region, index, nregions, phase, done,
// total, best_ms) (may be None); Ctrl-C, or the callback raising or
// returning true, stops the tuning (HARP_E_CANCELLED).
static int on_tune(void *ctx, const char *region, int index, int nregions, const char *phase, int done, int total,
                   double best_ms) {
  return call_progress(static_cast<Progress *>(ctx), region, index, nregions, phase, done, total, best_ms);
}

// harp_tune on c (compiled with knobs, cache_dir, precision; weights:
// weights_of) with the tuner's settings; the JSON report as str.
static nb::object tune(nb::object owner, nb::object params_obj, const std::vector<std::string> &knobs,
                       const std::string &cache_dir, const std::string &precision, int budget, int repeat, int warmup,
                       uint64_t seed, bool no_store, const std::string &log, const std::vector<std::string> &regions,
                       nb::object progress) {
  Compiled &c = nb::cast<Compiled &>(owner);
  std::vector<unsigned char> zeros;
  const void *params = weights_of(c, params_obj, &zeros);
  auto kn = cstrs(knobs), rg = cstrs(regions);
  harp_options o{};
  o.knobs = kn.data();
  o.cache_dir = cache_dir.empty() ? nullptr : cache_dir.c_str();
  o.precision = precision.empty() ? nullptr : precision.c_str();
  Progress p;
  p.fn = progress;
  harp_tune_options to{budget, repeat, warmup, seed, no_store, log.empty() ? nullptr : log.c_str(),
                       regions.empty() ? nullptr : rg.data(), on_tune, &p};
  harp_error e{};
  char *report = nullptr;
  harp_status st;
  {
    nb::gil_scoped_release nogil;
    st = harp_tune(&e, c.c, params, harp_params_bytes(c.c), &o, &to, &report);
  }
  if (!st) {
    nb::object r = text(report);
    harp_string_free(report);
    return r;
  }
  if (p.type) { // the callback's exception, or KeyboardInterrupt
    PyErr_Restore(p.type, p.value, p.tb);
    throw nb::python_error();
  }
  if (PyErr_CheckSignals() != 0) throw nb::python_error();
  raise_harp(e);
}

NB_MODULE(_harp, m) {
  m.doc() = "harp's C API (harp.h) for the Python package: use harp.InferenceSession / harp.compile";
  m.def("version", [] { return std::string(harp_version()); });
  m.def("status_names", [] {
    nb::list l;
    for (int s = 0; s < (int)HARP_E_COUNT_; s++) l.append(nb::make_tuple(s, harp_status_name((harp_status)s)));
    return l;
  });
  nb::class_<Compiled>(m, "Compiled")
      .def_prop_ro("num_inputs", [](const Compiled &c) { return harp_num_inputs(c.c); })
      .def_prop_ro("num_outputs", [](const Compiled &c) { return harp_num_outputs(c.c); })
      .def("input", [](const Compiled &c, int k) { return info(c, false, k); })
      .def("output", [](const Compiled &c, int k) { return info(c, true, k); })
      .def_prop_ro("params_bytes", [](const Compiled &c) { return harp_params_bytes(c.c); })
      .def("param_offset", [](const Compiled &c, const std::string &name) { return harp_param_offset(c.c, name.c_str()); })
      .def_prop_ro("has_embedded_params", [](const Compiled &c) { return harp_embedded_params(c.c) != nullptr; })
      .def_prop_ro("arena_bytes", [](const Compiled &c) { return harp_arena_bytes(c.c); })
      .def("shapeset_objects", [](const Compiled &c) {
        int cc = 0;
        const char *why = nullptr;
        int n = harp_shapeset_objects(c.c, &cc, &why);
        return nb::make_tuple(n, cc, why ? nb::object(nb::str(why)) : nb::none());
      })
      .def_prop_ro("warning", [](const Compiled &c) -> nb::object {
        const char *w = harp_compiled_warning(c.c);
        return w ? nb::object(nb::str(w)) : nb::none();
      })
      .def("wait", [](Compiled &c) { // the background build (tier 0) waited for; its error raised
        harp_error e{};
        harp_status st;
        {
          nb::gil_scoped_release nogil;
          st = harp_compiled_wait(&e, c.c);
        }
        if (st) raise_harp(e);
      });
  m.def("compile", &compile, nb::arg("source"), nb::arg("fmt"), nb::arg("name"), nb::arg("backend"), nb::arg("shapes"),
        nb::arg("syms"), nb::arg("knobs"), nb::arg("params"), nb::arg("target"), nb::arg("cache_dir"), nb::arg("precision"),
        nb::arg("max_memory"), nb::arg("progress").none(), nb::arg("shapesets") = std::vector<std::string>(),
        nb::arg("shapeset_recompile") = false, nb::arg("tier0") = false);
  m.def("auto_box", [](const std::vector<std::pair<std::string, int64_t>> &dims) -> nb::object {
    /* harp_auto_box over (name, size) pairs: [(name, lo, hi)], or None when one name's sizes disagree */
    std::vector<const char *> names, out(dims.size() + 1);
    std::vector<int64_t> vals, lo(dims.size() + 1), hi(dims.size() + 1);
    for (const auto &d : dims) names.push_back(d.first.c_str()), vals.push_back(d.second);
    int n = harp_auto_box((int)dims.size(), names.data(), vals.data(), out.data(), lo.data(), hi.data());
    if (n < 0) return nb::none();
    nb::list r;
    for (int k = 0; k < n; k++) r.append(nb::make_tuple(nb::str(out[k]), lo[k], hi[k]));
    return r;
  }, nb::arg("dims"));
  nb::class_<Instance>(m, "Instance")
      .def("run", &run)
      .def("run_device", &run_device)
      .def("run_shaped", &run_shaped)
      .def("output", &output)
      .def("time_runs", &time_runs)
      .def("close", [](Instance &self) {
        nb::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(self.mu);
        harp_model_free(self.m);
        self.m = nullptr;
      })
      .def_prop_ro("closed", [](const Instance &self) { return self.m == nullptr; })
      .def_prop_ro("last_tier0", [](const Instance &self) { return self.m && harp_model_last_tier0(self.m); });
  m.def("tune", &tune, nb::arg("compiled"), nb::arg("params").none(), nb::arg("knobs"), nb::arg("cache_dir"),
        nb::arg("precision"), nb::arg("budget"), nb::arg("repeat"), nb::arg("warmup"), nb::arg("seed"), nb::arg("no_store"),
        nb::arg("log"), nb::arg("regions"), nb::arg("progress").none());
  m.def("new_instance", &new_instance, nb::arg("compiled"), nb::arg("threads"), nb::arg("device"), nb::arg("params").none());
}
