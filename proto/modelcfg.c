/* modelcfg.c: placeholder until the config parser lands. */
#include "modelcfg.h"
