/* standalone_cuda.h — the host side of a GPU package (harp compile --target sm80|sm90). */
#ifndef HARP_STANDALONE_CUDA_H
#define HARP_STANDALONE_CUDA_H

#include <stdbool.h>

#include "backend/cuda/region_cuda.h"
#include "util/util.h"

void cuda_standalone_host(ut_str *o, const cuda_model_tu *t);      /* model_host.c */
void cuda_standalone_ptx_c(ut_str *o, const char *ptx);            /* model_ptx.c */
void cuda_standalone_makefile(ut_str *o, const cuda_model_tu *t);  /* Makefile */
void cuda_standalone_readme(ut_str *o, const cuda_model_tu *t, bool have_ptx); /* README.md */

#endif
