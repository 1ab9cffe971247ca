/* kernel.h — the kernel layer: which kernel each region of a Function runs
 * on a target, and why it did not get a template, decided once for every
 * target (internal API of the C and CUDA backends).
 *
 * A target describes what it has as data (kn_target: its templates, their
 * limits and thresholds, a hook or two); the decision and its reason are
 * this layer's (select.c), over the target-neutral readers of contract.h.
 * A backend asks for a region's kernel (kn_select), prints it, and when the
 * printer refuses (a generator that rejects the shape, an operand's offset
 * that breaks an alignment) says so (kn_decline), which moves on to the
 * next candidate or to the generic loop nest with the reason recorded:
 *
 *   kn_sel s;
 *   harp_status st = kn_select(&s, &target, &src, r, 0, e);
 *   while (!st && s.kind != KN_GENERIC) {
 *     const char *why = NULL;
 *     bool done = false;
 *     st = print(&s, &done, &why);   // the backend's template printers
 *     if (st || done) break;
 *     st = kn_decline(&s, why);
 *   }
 *   // s.kind GENERIC: the loop nest; s.why / s.why_kind: what declined
 *   kn_sel_free(&s);
 *
 * The order: a GATHER region its own kernel; a recurrent cell (shape D)
 * the cell template where the target has one; a contraction region (GEMM,
 * conv, attention: ct_kind) that template or the generic loop nest; any
 * other region the target's row templates in its order, each step saying
 * whether a decline with a reason ends the search (the CPU's softmax and
 * pool: the loop nest is what suits such a region), is passed over (the
 * next template is tried, the reason kept unless a later one says more) or
 * is passed over quietly (the CPU's concatenation copies: the map template
 * after them says why it declined). */
#ifndef HARP_KERNEL_KERNEL_H
#define HARP_KERNEL_KERNEL_H

#include "kernel/contract.h"

typedef enum kn_kind {
  KN_GENERIC,   /* the loop nest (no template took the region) */
  KN_GATHER,    /* a GATHER region */
  KN_GEMM,      /* contraction templates */
  KN_CONV,
  KN_ATTENTION,
  KN_CELL,      /* a recurrent cell step (shape D) */
  KN_SOFTMAX,   /* row templates */
  KN_LAYERNORM,
  KN_POOL,
  KN_REDUCE,
  KN_CONCAT,
  KN_MAP,
  KN_EWISE,
  KN_KIND_COUNT
} kn_kind;

/* "generic", "gather", "gemm", "conv", "attention", "cell", "softmax", ... */
const char *kn_kind_name(kn_kind k);
/* GEMM, conv, attention. */
bool kn_is_contraction(kn_kind k);

typedef enum kn_on_decline {
  KN_DECLINE_STOP,  /* a decline with a reason ends the search: the loop nest */
  KN_DECLINE_NEXT,  /* the next template is tried; the reason is kept until a later one gives its own */
  KN_DECLINE_QUIET  /* the next template is tried; the reason is dropped */
} kn_on_decline;

typedef struct kn_step {
  kn_kind kind;
  kn_on_decline on_decline;
} kn_step;

#define KN_MAX_STEPS 8

/* What a target has.  Thresholds of 0 mean "none". */
typedef struct kn_target {
  const char *name;   /* "GPU", "CPU": in reasons ("no GPU template") */
  /* how the readers read (ct_src) */
  bool att_cast_operands, round_operands;
  bool cell;          /* recurrent cells (shape D) have a template */
  /* regions that are no contraction: the templates in the order tried */
  int nrows;
  kn_step rows[KN_MAX_STEPS];
  /* GEMM: an A whose reduced dimensions do not fold is copied into scratch
   * by a kernel of at most gemm_max_repack dimensions */
  int gemm_max_repack;
  /* attention: K and V must share a dtype */
  bool attn_same_kv_dtype;
  /* conv: depthwise convs (one input channel per group) have a template; a
   * conv of fewer output tiles (conv_tiles) than conv_few_tiles over a
   * reduction of conv_long_k or more runs the loop nest instead */
  bool conv_depthwise;
  int64_t conv_few_tiles, conv_long_k;
  int64_t (*conv_tiles)(const ct_conv *cv); /* -1: unknown */
  /* pool: at most pool_max_stride columns of stride, at least
   * pool_min_windows windows a plane, and a sum over disjoint unpadded
   * windows only when pool_sum_disjoint */
  int pool_max_stride, pool_min_windows;
  bool pool_sum_disjoint;
  /* reduce: a chain of steps with constants may follow the REDUCE (a mean) */
  bool reduce_epilogue;
  /* the map template's ops (ct_read_map), the elementwise kernel's limits */
  bool (*map_op)(tiny_op op);
  ct_ew_caps ewise;
} kn_target;

/* kn_select's flags. */
enum {
  KN_NO_ROW_TEMPLATES = 1,        /* regions that are no contraction or cell: the loop nest */
  KN_NO_CONTRACTION_TEMPLATES = 2 /* GEMM, conv and attention regions: the loop nest */
};

/* A region's kernel while it is being chosen, and what it read. */
typedef struct kn_sel {
  const kn_target *t;
  ct_src src;
  int kernel;
  unsigned flags;
  harp_error *e;
  kn_kind kind;     /* the candidate to print; KN_GENERIC: the loop nest (final) */
  kn_kind first;    /* the first candidate (KN_GENERIC: none) */
  int step;         /* the row step of `kind` (-1: not a row template) */
  const char *why;  /* why a template declined (NULL: none applied or said why) */
  kn_kind why_kind; /* the template that said so */
  char buf[160];    /* room for a reason with numbers in it */
  ct_row row;       /* row templates: the region's row reading (its src is `src`) */
  union {
    ct_gemm gemm;
    ct_conv conv;
    ct_attn attn;
    ct_softmax softmax;
    ct_layernorm layernorm;
    ct_pool pool;
    ct_reduce reduce;
    ct_ewise ewise;
  } u;
  ct_map_set *map;  /* KN_MAP (malloc'd) */
} kn_sel;

/* The first kernel kernel r of src->f may run on target t: s->kind and its
 * reading in s->u (or s->map).  s must stay where it is until
 * kn_sel_free (s->row points into it).  Errors only for memory. */
harp_status kn_select(kn_sel *s, const kn_target *t, const ct_src *src, int r, unsigned flags, harp_error *e);
/* The printer of s->kind refused it, saying why (NULL: no reason): the next
 * candidate, or KN_GENERIC. */
harp_status kn_decline(kn_sel *s, const char *why);
void kn_sel_free(kn_sel *s);

#endif
