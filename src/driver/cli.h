/* cli.h — shared pieces of the harp command-line driver.  The driver is the
 * only code that prints or exits. */
#ifndef HARP_CLI_H
#define HARP_CLI_H

#include <stdbool.h>

#include "harp/error.h"
#include "harp/knobs.h"
#include "harp/pipeline.h"
#include "harp/tensor.h"
#include "harp/tiny.h"

#define CLI_MAX_LIST 256
#define CLI_NAME_MAX 256 /* a --shapeset name */

/* Options most commands share. */
typedef struct cli_opts {
  const char *model;
  const char *out_dir;  /* --out */
  const char *dump_dir; /* --dump-dir (defaults to out_dir) */
  const char *backend;  /* --backend */
  const char *dumps[CLI_MAX_LIST];
  int ndumps;
  const char *outputs[CLI_MAX_LIST]; /* --outputs: node ids to return instead */
  int noutputs;
  const char *input_names[CLI_MAX_LIST], *input_files[CLI_MAX_LIST];
  int ninputs;
  const char *params[CLI_MAX_LIST]; /* --param NAME=FILE: inputs that are weights */
  int nparams;
  const char *target; /* --target: cpu|sm80|sm90 (compile; the machine regions are formed for) */
  const char *precision; /* --precision: tf32|fp32|fp16|bf16, how fp32 contractions compute on the GPU */
  const char *plans[CLI_MAX_LIST]; /* --plan REGION=FILE | FILE (borrowed from argv) */
  int nplans;
  bool random_inputs;
  unsigned long long seed;
  tiny_symtab syms; /* --sym */
  struct onnx_shape *shapes; /* --shape NAME=1x3x224x224 (ONNX models) */
  int nshapes;
  bool need_shapes; /* set by cli_load_model: an ONNX model's dynamic dims must all be given */
  bool fix_needed;  /* harp run: an --input whose values a node needs at import is fixed (--param) */
  bool host_flow;        /* the command runs run-time control flow on the host (run, bench) */
  bool shape_binds;      /* harp run: with --shapeset, --shape binds the box's symbols (as an --input file's shape) */
  long long loop_limit;  /* --loop-limit: a Loop's iterations at most (0: the default) */
  unsigned long long max_memory; /* --max-memory: one instance's arena plus weights at most (0: the machine's) */
  rt_knobs knobs;        /* the environment's knobs, then --knob's (cli_parse) */
  const char *knob_args[CLI_MAX_LIST + 1]; /* --knob NAME=VALUE, as given (NULL-terminated) */
  int nknobs;
  bool time_stages;      /* --time-stages: each compile's stage times to stderr */
  bool sources_only;     /* --sources-only (compile): the package's sources, no C compiler, no expected/ */
  const char *shapesets[CLI_MAX_LIST]; /* --shapeset NAME=LO..HI: one object for the box (harp/sgen.h) */
  int nshapesets;
  bool shapeset_recompile; /* --shapeset-recompile (run): a binding outside the box compiles on its own */
  bool shapeset_exact;     /* --shapeset exact (run): no box chosen by harp (cli_autobox.c); --shapeset auto: the default */
  bool derive; /* lower an expression of unbound symbols as a derived symbol (harp bench --bind: one GPU session) */
  /* harp bench --bind, while the session's model is imported unbound: each symbol the bindings name and its
   * largest value there, which bounds the ONNX import's sizes as a --shapeset's upper corner does (a table
   * sliced by S: the slice proved inside it) */
  const char *bind_names[CLI_MAX_LIST];
  int64_t bind_hi[CLI_MAX_LIST];
  int nbind_hi;
  char shapeset_why[600]; /* an ONNX model imported at its binding: why its ShapeSet dims could not stay symbols */
} cli_opts;

/* A loaded model: the prepared Tiny graph plus the tensors that feed it. */
typedef struct cli_model {
  tiny_graph *g;
  struct hg_program *program; /* .harp models: the frontend program (else NULL) */
  struct onnx_model *onnx; /* .onnx models: the import (weights, names); its program is `program` */
  tiny_symtab defaults;       /* .harp models: graph<B=1> defaults, bound last */
  tiny_symtab syms;    /* final binding */
  ut_tensor *inputs;   /* one per INPUT node, graph order (a host program: per model input, its order) */
  int ninputs;
  double load_ms, normalize_ms; /* the pipeline's first two stages, run by cli_load_model */
  const struct flow_program *flow; /* .onnx models with run-time control flow: the host program (g is NULL) */
  char *raw; /* with --shapeset: the graph before binding, canonical JSON (rt_sgen_compile's input) */
} cli_model;

/* --shapeset (cli_shapeset.c): m's graph before binding (m->raw) compiled
 * as one object for the boxes of --shapeset, m's other symbols fixed at
 * their binding (harp/sgen.h); with --time-stages, whether one object
 * serves the box or why not. */
struct rt_sgen;
struct rt_cpu_opts;
harp_status cli_shapeset_compile(harp_error *e, const cli_opts *o, const cli_model *m, struct rt_sgen **out);
/* The same with the CPU compile's options co (harp compile: the source kept, portable). */
harp_status cli_shapeset_compile_with(harp_error *e, const cli_opts *o, const cli_model *m, const struct rt_cpu_opts *co,
                                      struct rt_sgen **out);
/* With --shapeset, onnx_require_shapes for the dynamic dims of om but the
 * ShapeSet's (the import keeps those symbols, onnx_opts.keep_dynamic). */
struct onnx_model;
/* --shapeset: m->g with the symbols its ops tie to others over the box
 * (tiny_ties_text: G = 2 H) made derived ones; --time-stages says which. */
harp_status cli_shapeset_ties(harp_error *e, const cli_opts *o, cli_model *m);
harp_status cli_shapeset_require(harp_error *e, const cli_opts *o, const struct onnx_model *om);
/* An ONNX model whose ShapeSet dims the import or the lowering needs as
 * numbers (o->shapeset_why says which node): m compiled at its binding
 * alone (prepared by cli_load_model) and run, with the reason and the
 * compile count on --time-stages as run_shapeset prints them. */
harp_status cli_shapeset_per_binding(harp_error *e, const cli_opts *o, cli_model *m, ut_tensor *outs);
/* That case's box check, on om imported with the ShapeSet dims kept
 * (cli_onnx_load, before it imports at the binding): each ShapeSet dim
 * the given shapes (--shape, the --input files) size inside its box, else
 * InputMismatch naming it (nothing to check with --shapeset-recompile). */
harp_status cli_shapeset_check_dims(harp_error *e, const cli_opts *o, const struct onnx_model *om);

/* harp run with several input sets (run_sets.c): how many sets argv
 * holds (1 + its --next flags); run them all, each set's options parsed
 * by parse (cmd_run's own), one compile; the exit code. */
struct cli_backend;
int cli_run_sets_count(int argc, char **argv);
int cli_run_sets(int argc, char **argv, int (*parse)(int, char **, cli_opts *, const struct cli_backend **));
/* The outputs of m to o->out_dir/<name>.npy (all or nothing), and a line per output on stdout. */
harp_status cli_run_write_outputs(harp_error *e, const cli_opts *o, const cli_model *m, ut_tensor *outs);

/* Print "harp: error[...]" for e to stderr and return the exit code (1, or 2
 * for internal errors). */
int cli_report(const harp_error *e);
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse the shared options.  Unknown options are an error.  `allowed` is a
 * string of the option names the command accepts, e.g. "input sym out dump". */
int cli_parse(int argc, char **argv, const char *cmd, const char *allowed, cli_opts *o, harp_error *e);
/* o->knobs from the environment (the library's one reader) and --knob
 * NAME=VALUE (o->knob_args); cli_parse calls it. */
harp_status cli_knobs(harp_error *e, cli_opts *o);
void cli_opts_free(cli_opts *o);
/* --shape NAME=1x3x224x224: one more given shape. */
harp_status cli_add_shape(cli_opts *o, const char *spec, harp_error *e);

/* Load MODEL by extension, bind symbols (--sym, then input files, then model
 * defaults), read or generate inputs, and prepare the graph.  With
 * need_inputs false (dump), unbound symbols are allowed and no tensor is read. */
harp_status cli_load_model(harp_error *e, cli_opts *o, bool need_inputs, cli_model *m);
/* cli_load_model at binding spec ("NAME=V[,NAME=V]", --bind) over o's
 * --sym values, which stay o's: the binding's symbols into *syms (the
 * caller frees them), the model into *m. */
harp_status cli_load_model_at(harp_error *e, cli_opts *o, const char *spec, tiny_symtab *syms, cli_model *m);
void cli_model_free(cli_model *m);
/* harp run's default over an ONNX model's dynamic dims that --input files
 * set (cli_autobox.c; harp/autobox.h): when the cache's record says the
 * bucket has met another binding, o gains harp's box as --shapeset flags
 * (with --shapeset-recompile) and m is loaded again over it (a->boxes
 * non-NULL; free it with cli_autobox_free after o and m); else nothing,
 * the binding recorded.  Not with --shapeset, --shapeset exact, --shape,
 * --sym, --plan, --dump or another backend than cpu (cpu false). */
typedef struct cli_autobox_st {
  char **boxes;          /* the box chosen and compiled (NULL: none) */
  unsigned long long id; /* the model's identity and the bucket's key in the cache's record */
  char key[2048];
} cli_autobox_st;
harp_status cli_autobox(harp_error *e, cli_opts *o, cli_model *m, bool cpu, cli_autobox_st *a);
/* After a failed compile of the box cli_autobox chose (why): the bucket
 * recorded as compiling per binding, o without the box, m loaded again. */
harp_status cli_autobox_undo(harp_error *e, cli_opts *o, cli_model *m, cli_autobox_st *a, const harp_error *why);
void cli_autobox_free(cli_autobox_st *a);
/* The model file's graph alone, unbound and unprepared (m->g, m->program;
 * a .harp model's graph<B=1> defaults into *defaults). */
harp_status cli_load_graph(harp_error *e, cli_opts *o, cli_model *m, tiny_symtab *defaults);

/* Write the requested dumps that belong to the Tiny layer and earlier;
 * returns HARP_OK.  Fails on an unknown dump name. */
harp_status cli_write_dumps(harp_error *e, const cli_opts *o, const cli_model *m);
bool cli_wants_dump(const cli_opts *o, const char *name);
/* --backend: one table (cli.c).  A backend compiles for a target (the
 * interpreter compiles nothing) and runs it; `regions` plays the Function
 * of the target of --target back on the interpreter. */
typedef struct cli_backend {
  const char *name;
  const rt_target *target; /* NULL: the interpreter runs the graph */
  int harp_backend;               /* harp.h's harp_backend (host programs), or -1 */
  bool playback;                  /* regions */
} cli_backend;
/* The backend named name (NULL: cpu) among `allowed` ("cpu interp cuda"),
 * or NULL after a usage error for cmd (*rc: its exit code). */
const cli_backend *cli_backend_get(const char *cmd, const char *name, const char *allowed, int *rc);

/* The dumps of the compile stages (cli_stages.c): indexbook, poly_view,
 * region, function, plan, gpu, c, cu.  Each is made on a target: c on the
 * CPU; gpu and cu on CUDA (--target's architecture, else the command's
 * CUDA compile's, else sm80); the others on --target's, else on the
 * command's own compile's target, else the CPU.  The command's own compile
 * makes those of its target; the rest come from compiles of their own that
 * stop after the last stage they need.  Dumps are rendered as the stages
 * finish (the hook) and written at the end, so a compile that fails late
 * still leaves the dumps of the stages it ran (cli_dumps_salvage). */
struct cli_plans;
typedef struct cli_dumps {
  const cli_opts *o;
  int n;
  const char *name[8];
  char *text[8];
  int stage[8];
  const rt_target *own; /* the command's own compile (NULL: none) */
  const char *own_arch; /* its architecture (CUDA; NULL: the device's, until it runs) */
  bool describing;      /* compiles of cli_dumps_finish run now */
} cli_dumps;
void cli_dumps_init(cli_dumps *d, const cli_opts *o);
void cli_dumps_free(cli_dumps *d);
/* The command's own compile is for t (arch: CUDA's or NULL); whether the
 * dumps it makes need its analysis kept (indexbook, poly_view). */
bool cli_dumps_own(cli_dumps *d, const rt_target *t, const char *arch);
/* The hook of every compile the CLI runs (rt_compile_opts.after_stage, ctx: the cli_dumps). */
harp_status cli_dumps_hook(void *ctx, harp_error *e, const rt_compile *c, rt_stage stage);
/* The dumps not made yet, from compiles of their own; then every dump
 * written (all or nothing). */
harp_status cli_dumps_finish(harp_error *e, cli_dumps *d, cli_model *m, const struct cli_plans *pl);
/* What was rendered, written whatever failed (errors ignored): a failed
 * compile's earlier stages. */
void cli_dumps_salvage(cli_dumps *d);
/* Compile m for target t (arch: CUDA's) up to stage until (0: all), with
 * o's knobs, precision and pl's plans; the stage times on stderr with
 * --time-stages. */
harp_status cli_compile(harp_error *e, const cli_opts *o, cli_model *m, const struct cli_plans *pl, const rt_target *t,
                      const char *arch, rt_stage until, cli_dumps *d, rt_compile **out);
/* The stage times of c (and m's load) on stderr, when --time-stages. */
void cli_print_stage_times(const cli_opts *o, const cli_model *m, const rt_compile *c);
/* --target as a target: cpu (absent) or cuda with *arch sm80 / sm90. */
harp_status cli_target_of(harp_error *e, const cli_opts *o, const rt_target **t, const char **arch);

/* cli_gpu_target checks --target (sm80 | sm90), dflt when absent (NULL: the
 * device's); dump_gpu.c. */
harp_status cli_gpu_target(harp_error *e, const cli_opts *o, const char *dflt, const char **target);
/* Write text to DIR/FILE atomically (DIR is created). */
harp_status cli_write_text(harp_error *e, const char *dir, const char *file, const char *text);

/* Wall-clock milliseconds; t[0..n) sorted (t[0] / t[n-1] are min / max) and its median (cmd_bench.c). */
double cli_now_ms(void);
double cli_sorted_median(double *t, long n);


/* Models with run-time control flow (cli_flow.c): the inputs of the host
 * program (cli_load_model's part for them), and run / bench over it. */
harp_status cli_flow_inputs(harp_error *e, cli_opts *o, bool need_inputs, cli_model *m);
struct cli_backend;
int cli_flow_run(cli_opts *o, cli_model *m, const struct cli_backend *b, bool graphs);
int cli_flow_bench(cli_opts *o, cli_model *m, const struct cli_backend *b, bool graphs, long warmup, long repeat, bool json);

/* Write tensors to DIR/<name>.npy, all or nothing. */
harp_status cli_write_outputs(harp_error *e, const char *dir, const char *const *names, const ut_tensor *t, int n);

/* .harp models (cmd_frontend.c): load, lower to Tiny IR; defaults receives
 * the graph<...> default bindings. */
harp_status cli_harp_load(harp_error *e, const cli_opts *o, tiny_graph **g, tiny_symtab *defaults,
                        struct hg_program **program);

/* .onnx models (cmd_frontend.c): import, lower; *onnx holds the weights
 * and the name map (its program is the model's). */
struct onnx_model;
struct onnx_shape;
/* The shapes known before an import: --shape, then the --input files'
 * (loose); *shapes malloc'd.  The reader of --param k's file (ctx: o). */
harp_status cli_given_shapes(harp_error *e, const cli_opts *o, struct onnx_shape **shapes, int *n);
harp_status cli_read_param(harp_error *e, void *ctx, int k, ut_tensor *out);
harp_status cli_onnx_load(harp_error *e, cli_opts *o, tiny_graph **g, tiny_symtab *defaults, struct onnx_model **onnx);

/* --plan and --dump plan (cli_plan.c). */
struct rt_plan_override;
struct rt_plans;
typedef struct cli_plans {
  struct rt_plan_override *ov; /* the overrides of every --plan, in order */
  int n;
  char **keep; /* the texts they came from */
  int nkeep;
} cli_plans;
/* Read every --plan (for the machine of --target, default cpu). */
harp_status cli_plans_load(harp_error *e, const cli_opts *o, cli_plans *out);
void cli_plans_free(cli_plans *p);
/* One line per region saying where its plan came from, to stderr, for
 * notes worth seeing (ignored cache entries, refused plans). */
void cli_print_plan_notes(const struct rt_plans *ps);

/* Commands. */
int cmd_run(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_decompile(int argc, char **argv);
/* s as a JSON string literal, quotes included (malloc'd; NULL: out of memory). */
char *cli_json_quote(const char *s);

int cmd_viz(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_ops(int argc, char **argv);

#endif
