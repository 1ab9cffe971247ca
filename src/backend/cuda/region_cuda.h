/* region_cuda.h — a model's Function as GPU kernels (internal API of the CUDA
 * backend): the regions in one cuda_module and a host-side launch list.
 *
 *   cuda_model_build   every kernel of the Function, in order        model_cuda.c
 *     cuda_emit_region   one region: a template, a simple row        region_cuda.c
 *                        kernel, or the generic loop nest
 *       cuda_gen_generic   the isl loop nest of common/nest.c with   generic_cuda.c
 *                          shared loops spread over threads
 *
 * Device memory of a model: one arena holding, at the offsets of
 * cuda_model_tu, the Function's temporaries (its own layout), the inputs
 * and outputs, a scratch area shared by the kernels that need one (a
 * repacked GEMM operand, locals of generic kernels that do not fit a
 * thread), a packed area (weights repacked once for a template: an fp32
 * weight stored [K][N] transposed to K-major for TF32 wgmma), and a status
 * word kernels set when they stop on a bad index; plus the ConstPool
 * (weights), uploaded once. */
#ifndef HARP_REGION_CUDA_H
#define HARP_REGION_CUDA_H

#include "backend/cuda/cuda.h"
#include "harp/function.h"
#include "harp/knobs.h"
#include "harp/poly.h"

/* What a kernel parameter points at. */
typedef enum cuda_arg_kind {
  CUDA_ARG_NULL,    /* a NULL pointer (an absent optional tensor) */
  CUDA_ARG_BUF,     /* Function buffer `buffer`, + offset bytes */
  CUDA_ARG_SCRATCH, /* the scratch area, + offset bytes */
  CUDA_ARG_STATUS,  /* the status word (an int) */
  CUDA_ARG_PACKED,  /* the packed area (written by `once` launches), + offset bytes */
  CUDA_ARG_SYM      /* a ShapeSet build's symbol `buffer` (its index): the binding's value, a long */
} cuda_arg_kind;

typedef struct cuda_arg {
  cuda_arg_kind kind;
  int buffer;
  int64_t offset;
} cuda_arg;

/* One launch, in execution order.  A tensor-map parameter's argument is the
 * tensor it maps (the runtime encodes the map). */
typedef struct cuda_launch {
  const cuda_kernel *k;
  int fn_kernel;    /* the Function kernel (region) it belongs to */
  int nargs;
  cuda_arg args[CUDA_MAX_PARAMS];
  const char *note; /* why the region is not on a template (declined), or NULL */
  bool once;        /* runs once, right after the weights go up (it packs a weight); never in a graph */
  /* A ShapeSet build's grid.x at run time (grid_div > 0): the binding's
   * points grid_lit x the product of its symbols grid_sym[0..ngrid_sym) in
   * blocks of grid_div, at least 1, at most k->grid[0] (the box's corner hi) */
  int64_t grid_lit, grid_div;
  int grid_sym[CUDA_MAX_PARAMS];
  int ngrid_sym;
  /* and times each tile count j < ngrid_tile: (grid_tile[j] at the binding
   * + grid_tile_add[j]) / grid_tile_per[j], rounded down (Winograd's tiles
   * P = images x ceil(oh / m) x ceil(ow / m): cuda_wino_grids) */
  cuda_rtsz grid_tile[3];
  int64_t grid_tile_add[3], grid_tile_per[3];
  int ngrid_tile;
  int grid_axis; /* the grid the formula sizes: 0 grid.x (at most k->grid[0]), 1 grid.y (k->grid[1]) */
} cuda_launch;

/* A ShapeSet build's symbols (cuda_model_build; n 0: every size a constant):
 * a kernel that reads a size at run time takes symbol i as the parameter
 * hp_sv<i> (CUDA_ARG_SYM i), now[i] its value in this graph, hi[i] the
 * largest a run takes. */
typedef struct cuda_syms {
  int n;
  const char *const *names;
  const int64_t *hi;
} cuda_syms;

/* grid.x (grid.y: l->grid_axis 1) of launch l at the symbols' values sv (a constant grid: k's). */
int64_t cuda_launch_grid(const cuda_launch *l, const int64_t *sv);

/* What the region emitters share. */
typedef struct cuda_rctx {
  harp_error *e;
  const tiny_graph *g;
  const poly_view *pv;
  const fn_function *f;
  const tiny_symtab *syms;
  ut_arena *arena; /* scratch: loop trees, notes */
  cuda_module *mod;
  cuda_launch *launch;
  int nlaunch, caplaunch;
  int64_t scratch_bytes; /* the most one launch uses */
  int64_t packed_bytes;  /* the packed area so far (each pack 256-byte aligned) */
  struct rt_plan_choice *plans; /* per region, or NULL: the regions' own plans; the kernels set applied / note */
  cuda_math math;         /* how fp32 contractions compute (rt_gpu_opts.precision) */
  int nattn_generic;      /* attention regions no template took (generic kernels) */
  const struct rt_knobs *knobs; /* NULL: the defaults */
  cuda_syms gen;               /* a ShapeSet build's symbols (gen.n 0: none) */
  int64_t *gen_now;            /* their values in g */
  tiny_shape rep_a;            /* the GEMM's A copied at run-time sizes (cuda_repack_at_run_time): slot CUDA_SLOT_REP_A */
} cuda_rctx;
/* The slot that names cuda_rctx.rep_a, the dense copy of a repacked A. */
#define CUDA_SLOT_REP_A (-2)
/* The slot of an operand laid out at the box's corner hi (B's TF32 pack at
 * run-time sizes): its strides constants, its sizes read from the others. */
#define CUDA_SLOT_HI (-3)

/* Append the kernels and launches of Function kernel r. */
harp_status cuda_emit_region(cuda_rctx *c, int r);
/* The generic kernel of block-based region r (note: a comment, may be NULL),
 * or a GATHER. */
harp_status cuda_gen_generic(cuda_rctx *c, int r, const char *name, const char *note);
/* A launch of kernel k for Function kernel r; its arguments are filled by the caller. */
cuda_launch *cuda_launch_add(cuda_rctx *c, const cuda_kernel *k, int r);
/* A ShapeSet build's symbols names[0..n) (values hi[] at the box's corner
 * hi) followed by the derived symbols of g (tiny_dsym) whose definitions
 * read them and never shrink as they grow, each with its value where
 * names are at hi and g's other symbols as `at` binds them, into
 * names[n..cap), hi[n..cap): *out the count (their names g's).  A kernel
 * reads them at run time like the others (hp_sv<i>), the runtime computes
 * them at each binding.  LIMIT past cap. */
harp_status cuda_syms_derived(harp_error *e, const tiny_graph *g, const tiny_symtab *at, const char **names, int64_t *hi,
                              int n, int cap, int *out);
/* The index of the ShapeSet symbol of c whose value dim d is, or -1. */
int cuda_gen_sym(const cuda_rctx *c, const tiny_dim *d);
/* The product of dims [d0, d1) of sh as a formula *z of c's symbols (z->n
 * 0: none among them), *hi its value at the box's corner hi; false when it
 * takes more than 8 symbols. */
bool cuda_dims_formula(const cuda_rctx *c, const tiny_shape *sh, int d0, int d1, cuda_rtsz *z, int64_t *hi);
/* A row kernel of Function kernel r whose rows (the dims but the last of
 * the buffer at slot) are s->rows and row length (the last dim) s->cols:
 * in a ShapeSet build, when a symbol is among them, s counts them at run
 * time (nsyms, rows_sym, rows_lit, rt_cols; rows and cols the box's most)
 * and true; else s as it was, false. */
bool cuda_rows_at_run_time(const cuda_rctx *c, int r, int slot, cuda_rownorm_spec *s);
/* In a ShapeSet build, why a kernel that prints its sizes (elementwise,
 * reduction) leaves Function kernel r, whose buffer at slot has a symbol's
 * size, to the loop nest; else NULL. */
const char *cuda_sizes_printed(const cuda_rctx *c, int r, int slot);
/* The GEMM s of Function kernel r (A, B, C at slot[0..2]; -1: none; B at
 * CUDA_SLOT_HI: its packed copy, constant strides; the
 * tensor of epilogue op i at epi_slot[i]) on an
 * sm80 module, no split-K, C's columns or rows contiguous: in a ShapeSet
 * build, when a symbol is among the batches, M, N (C's dims [batch[0]..]
 * [batch[1]..][M..][N..] or [..][N..][M..]), K (A's or B's dims of K) or
 * the strides (a residual's too: the shortest suffixes of its tensor), s
 * reads them at run time (nsyms, rt_*; the sizes the box's most) and true. */
bool cuda_gemm_at_run_time(const cuda_rctx *c, int r, const int slot[3], const int *epi_slot, cuda_gemm_spec *s);
/* The multiply-adds of GEMM s of Function kernel r (A, B, C at slot[0..2])
 * at the box's corner hi in a ShapeSet build (C's elements there times K
 * there), else at the binding: what a choice between templates reads, so
 * that every binding of a box makes the same one. */
int64_t cuda_gemm_macs_hi(const cuda_rctx *c, int r, const int slot[3], const cuda_gemm_spec *s);
/* The implicit-GEMM conv s of Function kernel r (its input at x_slot, a
 * dense NCHW buffer, split-K too; a residual laid out like the
 * output reads its strides at run time too): in a ShapeSet build, when a
 * symbol is among the images, the height or the width, s reads them at run
 * time (nsyms, rt_n, rt_h, rt_w; n, h, w the box's most) and true. */
bool cuda_conv_at_run_time(const cuda_rctx *c, int r, int x_slot, cuda_conv_spec *s);
/* A ShapeSet build's attention (issue 25): the sequence lengths m (out's
 * rows) and n (k's rows), the batches b (out's dims before its batch
 * stride's suffix, when found: else b prints) and the strides of q, k, v,
 * mask, out (at slot[0..4] of Function kernel r; slot[3] read when s has a
 * mask) as formulas of c's symbols in s (rt_*, nsyms; m, n and b then the
 * box's largest).  False when
 * none varies or one cannot be written so (the sizes print, the box falls
 * back). */
bool cuda_attn_at_run_time(const cuda_rctx *c, int r, const int slot[5], cuda_attn_spec *s);
/* The last launch's size parameters (hp_sv<i>) bound to the symbols. */
void cuda_launch_sym_args(cuda_rctx *c);
/* The last launch (a row kernel of s, true above): its grid from the
 * binding's rows (when they vary), its size parameters bound to the symbols. */
void cuda_launch_rows(cuda_rctx *c, const cuda_rownorm_spec *s);
/* Split-K's GEMM spec g whose C is the fp32 workspace laid out at the box's
 * corner hi: C's strides made constants again. */
void cuda_splitk_ws_const(cuda_gemm_spec *g);
/* Split-K's zeroing of GEMM s's fp32 workspace (flags false) or of its
 * serial flags (a flag per tile of the GEMM kernel's grid) in a ShapeSet
 * build whose M or N is read at run time (the batches constant): the
 * binding's rows and columns of that area (laid out at the box's corner hi)
 * as *z, and true; false to zero the whole area (a constant count). */
bool cuda_splitk_zero_at(const cuda_gemm_spec *s, bool flags, const int64_t grid[3], cuda_zero_at *z);
struct ct_gemm; /* kernel/contract.h */
/* A ShapeSet build's copy of region r's repacked A (gm->nrep; A0 at its
 * slot, dense): each copied dim the run of A0's dims it spans (dims of 1
 * dropped), sizes and source strides as formulas into *s and the copy's
 * shape into c->rep_a (the GEMM's A at CUDA_SLOT_REP_A); false when a
 * dim is no such run or no size varies. */
bool cuda_repack_at_run_time(cuda_rctx *c, int r, const struct ct_gemm *gm, cuda_copy_at *s);
/* The last launch (of a kernel of cuda_gen_copy_at s): its grid.x from the
 * binding's elements, its sizes bound. */
void cuda_copy_grid(cuda_rctx *c, const cuda_copy_at *s);
/* Launch li (of a kernel of cuda_gen_zero_at z): its grid.x from the
 * binding's words. */
void cuda_zero_grid(cuda_rctx *c, int li, const cuda_zero_at *z);
/* The launches from l0 on: their size parameters bound to the symbols. */
void cuda_launches_sym_args(cuda_rctx *c, int l0);
/* The launches from l0 on of Winograd conv s (tile m, a ShapeSet build):
 * each kernel whose grid covers the tiles P (k->grid_items a block, along
 * k->grid_axis) gets it at the binding's P = images x ceil(oh / m) x
 * ceil(ow / m). */
void cuda_wino_grids(cuda_rctx *c, int l0, const cuda_conv_spec *s, int m);
/* Argument of the buffer at the kernel's slot (reads, then writes), + elements of dtype. */
cuda_arg cuda_arg_slot(const cuda_rctx *c, int r, int slot, int64_t elem_offset, tiny_dtype dt);

/* ---- the model ------------------------------------------------------------- */
typedef struct cuda_model_tu {
  cuda_module *mod;
  cuda_launch *launch;
  int nlaunch;
  const fn_function *f;
  const tiny_graph *g;
  /* the device arena, bytes; every part 256-byte aligned */
  size_t temp_bytes;    /* [0, temp_bytes): the Function's temporaries at their offsets */
  size_t *io_offset;    /* per Function buffer: FN_INPUT / FN_OUTPUT offset in the arena (else 0) */
  size_t scratch_off, scratch_bytes;
  size_t packed_off, packed_bytes; /* weights repacked by the `once` launches */
  int nonce;                       /* launches marked once */
  size_t status_off;
  size_t arena_bytes;
  int ntemplate, nsimple, ngeneric; /* launches by kind (counts for messages and tests) */
  cuda_math math;                   /* how its fp32 contractions compute */
  int nattn_generic;                /* attention regions on generic kernels (the template declined) */
  int ndead;                        /* regions dropped: nothing reads what they write */
  cuda_syms gen;                    /* a ShapeSet build's symbols (copies in arena) */
  int nkernels_emitted;             /* kernels the regions made; mod->n: those left after sharing */
  ut_arena *arena;                  /* notes, names, loop trees */
} cuda_model_tu;

/* Build the GPU translation unit of Function f (formed from g with Poly-View pv). */
/* plans (nullable): per region of f's partition, the plan to read instead of
 * the region's default (harp/tune.h rt_plans_choose); the template kernels
 * set each one's applied and note;
 * math: how fp32 contractions compute (TF32, strict fp32, fp16/bf16);
 * knobs (nullable: the defaults): no_templates, no_dedup, no_coalesce;
 * gen (nullable): a ShapeSet build's symbols, read at run time where a
 * kernel can (the generic loop nests). */
struct rt_plan_choice;
struct rt_knobs;
harp_status cuda_model_build(harp_error *e, const tiny_graph *g, const poly_view *pv, const fn_function *f,
                           const tiny_symtab *syms, cuda_arch arch, struct rt_plan_choice *plans,
                           cuda_math math, const struct rt_knobs *knobs, const cuda_syms *gen, cuda_model_tu **out);
void cuda_model_free(cuda_model_tu *t);
/* Kernels that are the same code and launch config compiled once: the
 * repeats leave t->mod, their launches use the kept kernel with their
 * arguments in its parameter order (cuda_dedup.c). */
harp_status cuda_model_dedup(harp_error *e, cuda_model_tu *t);
/* --dump gpu: {"gpu": {arch, kernels: [...], launches: [...], memory: {...}}}.  Malloc'd. */
harp_status cuda_model_dump_json(harp_error *e, const cuda_model_tu *t, char **out);
/* Byte offset of an argument's target in its space: the arena (temporaries,
 * I/O, scratch, status) or, for a weight, the ConstPool (*in_consts).
 * CUDA_ARG_NULL: -1. */
int64_t cuda_arg_offset(const cuda_model_tu *t, const cuda_arg *a, bool *in_consts);

/* grid.x of kernel k when persistent (k->persistent_tiles > 0) on a device
 * with sm_count SMs (<= 0: CUDA_DEFAULT_SMS); 0 for other kernels. */
int64_t rt_gpu_persistent_grid(const cuda_kernel *k, int sm_count);

/* The translation unit behind a model of harp/gpu.h (src/runtime/gpu.c). */
struct rt_gpu_model;
const cuda_model_tu *rt_gpu_tu(const struct rt_gpu_model *m);

#endif
