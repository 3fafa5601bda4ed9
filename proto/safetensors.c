/* safetensors.c: placeholder until the header parser lands. */
#include "safetensors.h"
