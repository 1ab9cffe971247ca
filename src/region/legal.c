/* legal.c — is a candidate set a region the backends can generate?
 * (seed 000 §4.1 steps 3 and 5: UCC, can_compute_at and the halo, the
 * region shapes A / B / C of harp/region.h, local buffers).
 * Needs: units.c, Poly Core.  Gives: rg_check_set, rg_natural_tile, rg_in.
 *
 * In order (the first failure names the STOP reason):
 *   non_scop            a GATHER with anything else
 *   not_ucc             a member other than the sink is read outside the
 *                       set or is a model output
 *   unsupported_shape   an attention with more blocks; two contractions
 *   compute_at_illegal  can_compute_at refuses an internal edge
 *   halo_too_large      the consumer's natural tile needs more than
 *                       halo_max x its own footprint extra
 *   unsupported_shape   A: a block not fed by the contraction (a prologue)
 *                       or an epilogue reading a value not pointwise
 *   epilogue_not_template  A: an epilogue op no contraction template applies
 *   buffer_too_large    B: an intermediate's footprint per shared-loop
 *                       point exceeds the local buffer budget */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "region/rg_int.h"

bool rg_in(const int *set, int n, int x) {
  for (int i = 0; i < n; i++)
    if (set[i] == x) return true;
  return false;
}

static bool illegal(rg_eval *ev, const char *reason, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool illegal(rg_eval *ev, const char *reason, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ev->legal = false;
  ev->reason = reason;
  vsnprintf(ev->detail, sizeof ev->detail, fmt, ap);
  va_end(ap);
  return false;
}

/* The tile a block's own kernel would compute: for a contraction 8 x 8
 * along window variables (conv), else 64 along the last m and n variables;
 * for others one row (1 on every output variable but the last). */
void rg_natural_tile(const rg_ctx *c, int block, int64_t *tile) {
  const poly_block_info *b = poly_block(c->pv, block);
  for (int v = 0; v < POLY_MAX_VARS; v++) tile[v] = 1;
  if (b->kind == POLY_CONTRACTION) {
    const poly_contraction *k = b->con;
    bool win = false;
    for (int d = 0; d < k->lhs_rank; d++)
      if (k->lhs_idx[d].kind == POLY_IDX_WINDOW) tile[k->lhs_idx[d].out_var] = 8, win = true;
    for (int d = 0; d < k->rhs_rank; d++)
      if (k->rhs_idx[d].kind == POLY_IDX_WINDOW) tile[k->rhs_idx[d].out_var] = 8, win = true;
    if (!win && k->nm) tile[k->m[k->nm - 1]] = 64;
    if (k->nn) tile[k->n[k->nn - 1]] = 64;
    return;
  }
  if (b->nout > 0) tile[b->nout - 1] = -1;
}

/* ---- memoized Poly Core answers ------------------------------------------------ */
static rg_memo *memo_of(rg_ctx *c, int block, int access) {
  if (!c->memo) {
    c->memo = ut_arena_alloc(c->arena, sizeof(rg_memo *) * ((size_t)poly_nblocks(c->pv) * POLY_MAX_ACC + 1));
    if (!c->memo) return NULL;
  }
  /* key on the first access reading the same tensor: MUL(x, x) is one edge */
  const poly_block_info *b = poly_block(c->pv, block);
  int a = access;
  for (int k = 0; k < access; k++)
    if (!b->access[k].write && b->access[k].tensor == b->access[access].tensor) a = k, k = access;
  rg_memo **m = &c->memo[(size_t)block * POLY_MAX_ACC + (size_t)a];
  if (!*m) *m = ut_arena_alloc(c->arena, sizeof(rg_memo));
  return *m;
}

static harp_status memo_halo(rg_ctx *c, int tensor, int block, int access, const poly_halo **out) {
  rg_memo *m = memo_of(c, block, access);
  if (!m) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!m->has_halo) {
    int64_t tile[POLY_MAX_VARS];
    rg_natural_tile(c, block, tile);
    if (poly_can_compute_at(c->e, c->pv, tensor, block, tile, &m->halo)) return c->e->code;
    m->has_halo = true;
  }
  *out = &m->halo;
  return HARP_OK;
}

static harp_status memo_pointwise(rg_ctx *c, int block, int access, bool *pw) {
  rg_memo *m = memo_of(c, block, access);
  if (!m) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!m->has_pw) {
    if (poly_access_is_pointwise(c->e, c->pv, block, access, &m->pointwise)) return c->e->code;
    m->has_pw = true;
  }
  *pw = m->pointwise;
  return HARP_OK;
}

harp_status rg_min_buffer(rg_ctx *c, int tensor, int block, int access, int prefix, const poly_min_buffer **out) {
  rg_memo *m = memo_of(c, block, access);
  if (!m) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!m->has_mb[prefix]) {
    int64_t tile[POLY_MAX_VARS];
    for (int v = 0; v < POLY_MAX_VARS; v++) tile[v] = v < prefix ? 1 : -1;
    if (poly_min_buffer_for_edge(c->e, c->pv, tensor, block, tile, c->budget, &m->mb[prefix])) return c->e->code;
    m->has_mb[prefix] = true;
  }
  *out = &m->mb[prefix];
  return HARP_OK;
}

/* Internal edges: (producer block, consumer block, access). */
typedef struct iedge {
  int from, to, access, tensor;
} iedge;

static int internal_edges(const rg_ctx *c, const int *blocks, int n, iedge *out, int cap) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    const poly_block_info *b = poly_block(c->pv, blocks[i]);
    for (int a = 0; a < b->naccess; a++) {
      if (b->access[a].write) continue;
      int p = rg_producer_block(c, b->access[a].tensor);
      if (p >= 0 && p != blocks[i] && rg_in(blocks, n, p) && k < cap)
        out[k++] = (iedge){p, blocks[i], a, b->access[a].tensor};
    }
  }
  return k;
}

/* Is `to` reachable from `from` along internal edges? */
static bool reaches(const iedge *ed, int ne, int from, int to) {
  if (from == to) return true;
  for (int i = 0; i < ne; i++)
    if (ed[i].from == from && reaches(ed, ne, ed[i].to, to)) return true;
  return false;
}

static bool check_ucc(rg_ctx *c, const int *blocks, int n, rg_eval *ev) {
  int units[RG_MAX_SET], nu = 0;
  for (int i = 0; i < n; i++) {
    int u = c->unit_of_block[blocks[i]];
    if (!rg_in(units, nu, u)) units[nu++] = u;
  }
  int sink = -1;
  for (int i = 0; i < nu; i++)
    if (sink < 0 || c->units[units[i]].node > c->units[sink].node) sink = units[i];
  for (int i = 0; i < nu; i++) {
    const rg_unit *u = &c->units[units[i]];
    if (units[i] == sink) continue;
    if (u->escapes) return illegal(ev, "not_ucc", "%s is a model output", u->name);
    for (int k = 0; k < u->ncons; k++)
      if (!rg_in(units, nu, u->cons[k]))
        return illegal(ev, "not_ucc", "%s is also read by %s", u->name, c->units[u->cons[k]].name);
  }
  if (nu > 1)
    for (int i = 0; i < nu; i++)
      if (c->units[units[i]].kind == RG_U_ATTENTION)
        return illegal(ev, "unsupported_shape", "an attention takes no prologue or epilogue besides casts");
  return true;
}

static bool check_halos(rg_ctx *c, const iedge *ed, int ne, rg_eval *ev) {
  for (int i = 0; i < ne; i++) {
    const poly_halo *hp = NULL;
    if (memo_halo(c, ed[i].tensor, ed[i].to, ed[i].access, &hp)) return false;
    const poly_halo h = *hp;
    if (!h.ok) return illegal(ev, "compute_at_illegal", "%s at %s: %s", rg_block_name(c, ed[i].from), rg_block_name(c, ed[i].to), h.why);
    int64_t core = h.elems - h.halo_elems;
    if (h.halo_elems > 0 && (double)h.halo_elems > c->halo_max * (double)(core > 0 ? core : 1))
      return illegal(ev, "halo_too_large", "a tile of %s needs %lld elements of %s around its own %lld (%lld bytes of halo)",
                     rg_block_name(c, ed[i].to), (long long)h.halo_elems, rg_block_name(c, ed[i].from), (long long)core,
                     (long long)h.bytes);
  }
  return true;
}

/* A CAST of a tensor from outside the set that only epilogue ops read: the
 * epilogue loads that operand and converts it (fp16 bias widened to fp32). */
/* A CAST a contraction of the set reads its operand through (Poly-View
 * composed the read through it). */
static bool contraction_operand_cast(const rg_ctx *c, const int *blocks, int n, int node) {
  for (int i = 0; i < n; i++) {
    const poly_block_info *k = poly_block(c->pv, blocks[i]);
    if (k->kind != POLY_CONTRACTION) continue;
    for (int a = 0; a < k->naccess; a++)
      for (int v = 0; v < k->access[a].nvia; v++)
        if (k->access[a].via[v] == node) return true;
  }
  return false;
}

static bool operand_cast(const rg_ctx *c, const int *blocks, int n, int K, const iedge *ed, int ne, int b) {
  const poly_block_info *x = poly_block(c->pv, b);
  if (b == K || b == blocks[n - 1] || x->kind != POLY_EWISE || c->g->nodes[x->node].op != TINY_CAST) return false;
  if (c->no_operand_casts && !contraction_operand_cast(c, blocks, n, x->node)) return false;
  if (K >= 0 && (reaches(ed, ne, b, K) || reaches(ed, ne, K, b))) return false;
  int p = rg_producer_block(c, x->access[0].tensor);
  return p < 0 || !rg_in(blocks, n, p);
}

/* K < 0: shape B */
bool rg_operand_cast(rg_ctx *c, const int *blocks, int n, int K, int b) {
  iedge ed[4 * RG_MAX_SET];
  int ne = internal_edges(c, blocks, n, ed, 4 * RG_MAX_SET);
  return operand_cast(c, blocks, n, K, ed, ne, b);
}

static bool check_contraction(rg_ctx *c, const int *blocks, int n, int K, const iedge *ed, int ne, rg_eval *ev) {
  for (int i = 0; i < n; i++) {
    int b = blocks[i];
    if (b == K || operand_cast(c, blocks, n, K, ed, ne, b)) continue;
    poly_kind k = poly_block(c->pv, b)->kind;
    if (k != POLY_EWISE && k != POLY_MOVEMENT_AFFINE)
      return illegal(ev, "unsupported_shape", "%s (%s) cannot be an epilogue of %s", rg_block_name(c, b), poly_kind_name(k),
                     rg_block_name(c, K));
    bool side = false; /* on an exact QDQ Add's residual way (resfma.c): reached through the step */
    if (!reaches(ed, ne, K, b) && !(rg_resfma_part(c, blocks, n, K, b, &side) && side))
      return illegal(ev, "unsupported_shape", "%s %s", rg_block_name(c, b),
                     reaches(ed, ne, b, K) ? "computes an operand of the contraction (a prologue)" : "is not fed by the contraction");
  }
  for (int i = 0; i < ne; i++) {
    bool pw = false;
    if (operand_cast(c, blocks, n, K, ed, ne, ed[i].from)) continue; /* an operand, read as the epilogue likes */
    if (memo_pointwise(c, ed[i].to, ed[i].access, &pw)) return false;
    if (!pw)
      return illegal(ev, "unsupported_shape", "the epilogue op %s reads %s not pointwise", rg_block_name(c, ed[i].to),
                     rg_block_name(c, ed[i].from));
  }
  /* the loops the contraction and its epilogue share (all output dims when
   * the epilogue keeps the accumulator's shape) */
  int loops[RG_MAX_SET], nl = 0;
  for (int i = 0; i < n; i++)
    if (!operand_cast(c, blocks, n, K, ed, ne, blocks[i])) loops[nl++] = blocks[i];
  /* an op the contraction templates cannot apply would leave the whole
   * contraction to the generic loop nest (~100x slower): two kernels are
   * better, the op in its own region */
  int bad;
  if (!rg_epilogue_template(c, blocks, n, K, &bad))
    return illegal(ev, "epilogue_not_template", "%s (%s) is not an epilogue step of the contraction templates",
                   rg_block_name(c, bad), tiny_op_name(c->g->nodes[poly_block(c->pv, bad)->node].op));
  if (poly_fusion_prefix(c->e, c->pv, loops, nl, &ev->prefix)) return false;
  ev->shape = RG_SHAPE_CONTRACTION;
  ev->anchor = K;
  return true;
}

static bool check_rows(rg_ctx *c, const int *blocks, int n, const iedge *ed, int ne, rg_eval *ev) {
  /* operand casts convert at load: outside the loop structure */
  int loops[RG_MAX_SET], nl = 0;
  for (int i = 0; i < n; i++) {
    poly_kind k = poly_block(c->pv, blocks[i])->kind;
    if (k != POLY_EWISE && k != POLY_REDUCE && k != POLY_MOVEMENT_AFFINE)
      return illegal(ev, "unsupported_shape", "%s is a %s", rg_block_name(c, blocks[i]), poly_kind_name(k));
    if (!operand_cast(c, blocks, n, -1, ed, ne, blocks[i])) loops[nl++] = blocks[i];
  }
  if (poly_fusion_prefix(c->e, c->pv, loops, nl, &ev->prefix)) return false;
  /* one buffer per intermediate value, as large as its largest footprint */
  int64_t per_tensor_max = 0;
  for (int i = 0; i < ne; i++) {
    if (!rg_in(loops, nl, ed[i].from)) continue; /* a converted operand, loaded by its readers */
    const poly_min_buffer *mbp = NULL;
    if (rg_min_buffer(c, ed[i].tensor, ed[i].to, ed[i].access, ev->prefix, &mbp)) return false;
    const poly_min_buffer mb = *mbp;
    if (mb.buffer == PLAN_BUF_GMEM)
      return illegal(ev, "buffer_too_large", "%s needs %lld bytes of %s per point of the %d shared loops (budget %lld)",
                     rg_block_name(c, ed[i].to), (long long)mb.halo.footprint_bytes, rg_block_name(c, ed[i].from),
                     ev->prefix, (long long)c->budget);
    if (mb.buffer == PLAN_BUF_SMEM_RING) {
      bool seen = false;
      for (int j = 0; j < i; j++) seen |= ed[j].tensor == ed[i].tensor;
      if (!seen) ev->local_smem += mb.bytes;
      per_tensor_max = UT_MAX(per_tensor_max, mb.bytes);
    }
  }
  ev->shape = RG_SHAPE_ROW;
  ev->anchor = blocks[n - 1];
  (void)per_tensor_max;
  return true;
}

harp_status rg_check_set(rg_ctx *c, const int *blocks, int n, int gather, rg_eval *ev) {
  memset(ev, 0, sizeof *ev);
  ev->legal = true;
  ev->anchor = -1;
  if (gather >= 0) {
    if (n > 0) illegal(ev, "non_scop", "%s reads at data-dependent positions: it ends a region", c->g->nodes[gather].id);
    else ev->shape = RG_SHAPE_GATHER;
    return HARP_OK;
  }
  if (n == 0) return ut_fail(c->e, HARP_E_INTERNAL, NULL, "an empty region");
  if (n > RG_MAX_SET) {
    illegal(ev, "unsupported_shape", "more than %d blocks in one region", RG_MAX_SET);
    return HARP_OK;
  }
  /* a recurrent cell (cell.c): a unit with several outputs, a region alone */
  for (int i = 0; i < n; i++) {
    const rg_unit *u = &c->units[c->unit_of_block[blocks[i]]];
    if (u->kind != RG_U_CELL) continue;
    if (u->nblocks != n) {
      illegal(ev, "unsupported_shape", "a recurrent cell (%s) takes nothing in", u->name);
      return HARP_OK;
    }
    ev->shape = RG_SHAPE_CELL;
    ev->anchor = c->cells[u->cell].con[0];
    return HARP_OK;
  }
  if (!check_ucc(c, blocks, n, ev)) return HARP_OK;
  /* an attention unit alone */
  int u0 = c->unit_of_block[blocks[0]];
  if (c->units[u0].kind == RG_U_ATTENTION && c->units[u0].nblocks == n) {
    ev->shape = RG_SHAPE_ATTENTION;
    ev->anchor = c->units[u0].att->pv;
    harp_status st = poly_fusion_prefix(c->e, c->pv, blocks, n, &ev->prefix);
    return st;
  }
  if (n == 1) {
    ev->shape = RG_SHAPE_SINGLE;
    ev->anchor = blocks[0];
    ev->prefix = poly_block(c->pv, blocks[0])->nout;
    return HARP_OK;
  }
  iedge ed[4 * RG_MAX_SET];
  int ne = internal_edges(c, blocks, n, ed, 4 * RG_MAX_SET);
  int ncon = 0, K = -1;
  for (int i = 0; i < n; i++)
    if (poly_block(c->pv, blocks[i])->kind == POLY_CONTRACTION) ncon++, K = blocks[i];
  if (ncon > 1) {
    illegal(ev, "unsupported_shape", "%d contractions that are not an attention", ncon);
    return HARP_OK;
  }
  harp_status before = c->e->code;
  bool ok = check_halos(c, ed, ne, ev) &&
            (ncon ? check_contraction(c, blocks, n, K, ed, ne, ev) : check_rows(c, blocks, n, ed, ne, ev));
  (void)ok;
  return c->e->code != before ? c->e->code : HARP_OK;
}
