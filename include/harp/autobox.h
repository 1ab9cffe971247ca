/* harp/autobox.h — the ShapeSet harp chooses by itself for an ONNX model
 * whose dynamic dims a binding sets, when the caller names no box (the
 * default of harp run, harp.h and a Python session; docs/options.md,
 * "ShapeSets chosen by harp"): per dynamic dim at v >= 2 the power-of-two
 * bucket [2^k, 2^(k+1) - 1] around v (harp_auto_box, the one place that
 * says so), tiered: a bucket's first binding compiles alone, a second
 * distinct one compiles the box.  Across processes (harp run, harp.h) the
 * cache directory remembers a bucket's first binding (rt_autobox_tier).
 * Needs: harp/onnx.h.  Gives: rt_autobox_*. */
#ifndef HARP_AUTOBOX_H
#define HARP_AUTOBOX_H

#include <stddef.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/onnx.h"

/* The boxes harp chooses for the dims m's options gave (m->bound; a
 * dim_param by its name, an unnamed dim as "INPUT:AXIS"):
 * "NAME=LO..HI", LO < HI, NULL-terminated into *boxes (NULL: no box — no
 * dynamic dim at 2 or more, or the sizes of one dim_param disagree), and
 * the bucket's key — the boxes and the dims held at 0 or 1, "NAME=V" — into
 * key[cap], the binding itself ("NAME=V" per dim) into binding[cap]. */
harp_status rt_autobox_onnx(harp_error *e, const onnx_model *m, char ***boxes, char *key, char *binding, size_t cap);
void rt_autobox_free(char **boxes);

/* What the bucket key of model `model_id` (rt_autobox_model_id) compiles
 * at binding, by the record under cache_dir (NULL: the default cache
 * directory): its first binding alone (the record made now, or the same
 * binding met again), the box (the record names another binding), or
 * the binding alone for good (a box that failed before, rt_autobox_failed).
 * A record that cannot be read or written counts as a first binding. */
typedef enum { RT_AUTOBOX_EXACT, RT_AUTOBOX_BOX, RT_AUTOBOX_FAILED } rt_autobox_tier;
rt_autobox_tier rt_autobox_tier_of(const char *cache_dir, uint64_t model_id, const char *key, const char *binding);
/* Record that the box of key could not be compiled as one object (why). */
void rt_autobox_failed(const char *cache_dir, uint64_t model_id, const char *key, const char *why);
/* A model's identity for the record: a file's absolute path, size and
 * modification time (path), else the bytes' hash (data, len). */
uint64_t rt_autobox_model_id(const char *path, const void *data, size_t len);

#endif
