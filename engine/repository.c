/* repository.c: placeholder until the repository lands. */
#include "repository.h"
