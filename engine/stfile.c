/* stfile.c: placeholder until the file reader lands. */
#include "stfile.h"
