/* tiny_spell.h — the renderers' text of an elementwise op: the spelling
 * columns of the op table (harp/tiny_ops.h), for the C and CUDA backends.
 * Needs: harp/tiny.h, util/util.h (ut_str).  Gives: the lookups (and the
 * dtype table's backend columns) and tiny_op_spell, which fills a text in. */
#ifndef HARP_TINY_SPELL_H
#define HARP_TINY_SPELL_H

#include "harp/tiny.h"
#include "util/util.h"

/* Text with "%s" per operand, or NULL where the op has none.
 * tiny_op_c: the generic loops' C; on int32 operands when in_int; in CUDA
 * generic kernels when gpu.  tiny_op_cuda: the CUDA elementwise kernel's.
 * tiny_op_vec: the CPU vector layer's ($P_* helpers). */
const char *tiny_op_c(tiny_op op, bool in_int, bool gpu);
const char *tiny_op_cuda(tiny_op op);
const char *tiny_op_vec(tiny_op op);

/* The dtype table's backend columns (harp/tiny.h): the C storage type
 * ("uint16_t", ...), the CUDA one ("hk_u16", ...), the CUDA kernels' helper
 * loading an element as float ("hk_ldf_f16", ...) and the one converting a
 * float to the storage ("hk_f2h", ...); "?" for an unknown dtype. */
const char *tiny_dtype_c(tiny_dtype t);
const char *tiny_dtype_cuda(tiny_dtype t);
const char *tiny_dtype_cuda_ld(tiny_dtype t);
const char *tiny_dtype_cuda_cvt(tiny_dtype t);

/* Append tmpl to o with its k-th "%s" replaced by x[k] (by x[n - 1] past
 * the end: a unary op's text may name its operand twice); "%%" is '%'. */
void tiny_op_spell(ut_str *o, const char *tmpl, const char *const *x, int n);

#endif
