/* standalone.h — model.h, main.c and Makefile of a standalone CPU package. */
#ifndef HARP_STANDALONE_H
#define HARP_STANDALONE_H

#include "util/util.h"

void cgen_standalone_header(hp_str *o);
void cgen_standalone_main(hp_str *o);
void cgen_standalone_makefile(hp_str *o);

#endif
