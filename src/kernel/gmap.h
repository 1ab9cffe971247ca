/* gmap.h — an elementwise region whose inputs are read through floor
 * divisions and remainders by constants (a nearest upsample's x[h / 2], a
 * depth-to-space's x[4 c + 2 (h % 2) + w % 2, h / 2, w / 2]), read for a
 * kernel that takes every size at run time (src/kernel/contract_gmap.c;
 * the CPU's ShapeSet objects print it, src/backend/c/gmap_c.c).
 * Needs: contract.h (ct_src, ct_tensor, ct_map_op), harp/polyquasi.h.
 * Gives: ct_gmap, ct_read_gmap. */
#ifndef HARP_KERNEL_GMAP_H
#define HARP_KERNEL_GMAP_H

#include "harp/polyquasi.h"
#include "kernel/contract.h"

/* An input: each axis of its tensor indexed by a poly_qaxis over the
 * domain's variables (the output's axes, in order). */
typedef struct ct_gmap_in {
  ct_tensor t; /* offset 0: the indices carry any offset */
  int rank;
  poly_qaxis ax[TINY_MAX_RANK];
  /* a concat's piece (cut_known): the axis read at y's cut coordinate
   * minus cut_off, a sum of sizes (an addend of y: 0; the piece's own
   * input: the PAD's low amount), where ct_cut_origins finds it so
   * (ax[cut_axis] is then that index at this binding); -1: not known */
  int cut_axis;
  ct_size cut_off;
} ct_gmap_in;

/* One slab of y (lo <= x_var <= hi of the set's var, the rest whole):
 * its inputs and ops. */
typedef struct ct_gmap_piece {
  int64_t lo, hi;
  bool cut_known; /* lo and hi + 1 as sizes of the graph: cut_lo, cut_lo + cut_len (ct_cut_sizes) */
  ct_size cut_lo, cut_len;
  int nin;
  ct_gmap_in in[CT_MAP_MAX_IN];
  int nops;
  ct_map_op ops[CT_MAP_MAX_OPS]; /* as ct_map's: operands first, y the last */
} ct_gmap_piece;

typedef struct ct_gmap {
  int nv;                       /* the domain: y's axes */
  int64_t size[POLY_MAX_VARS];
  ct_tensor y;                  /* written point for point, dense */
  int var;                      /* the axis the pieces cut (-1: one piece, the whole) */
  int npiece;
  ct_gmap_piece piece[CT_MAP_MAX_PIECES];
} ct_gmap;

/* True when kernel's region is elementwise blocks with one output written
 * point for point, cut into slabs as the map's pieces (ct_map_cuts), where
 * every chain of reads from y reads padding or real elements of an fp32
 * tensor through one quasi-affine piece (poly_chain_quasi), a value of the
 * region computed at the point its chain reaches; false with *why set
 * else.  `ok(op)` says which Tiny ops the target covers. */
bool ct_read_gmap(const ct_src *s, int kernel, bool (*ok)(tiny_op op), ct_gmap *out, const char **why);

#endif
