/* cpu.c: placeholder until the CPU engine lands. */
#include "backend.h"
