/* model.c: placeholder until weight import lands. */
#include "model.h"
