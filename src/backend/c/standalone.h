/* standalone.h — model.h, main.c and Makefile of a standalone CPU package. */
#ifndef HARP_STANDALONE_H
#define HARP_STANDALONE_H

#include "util/util.h"

void cgen_standalone_header(ut_str *o);
void cgen_standalone_main(ut_str *o);
void cgen_standalone_makefile(ut_str *o);

#endif
