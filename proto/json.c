/* json.c: jansson helpers shared by proto/'s parsers. */
#include <stdio.h>
#include <string.h>

#include "json.h"

const char *rnnd_json_describe(const json_t *v, char *buf, size_t n)
{
        switch (json_typeof(v)) {
        case JSON_INTEGER:
                snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                break;
        case JSON_REAL:
                snprintf(buf, n, "%.15g", json_real_value(v));
                /* Make 8.0 read as a real, not as the integer 8. */
                if (buf[strspn(buf, "-0123456789")] == '\0')
                        strncat(buf, ".0", n - strlen(buf) - 1);
                break;
        case JSON_STRING:
                snprintf(buf, n, "\"%.40s%s\"", json_string_value(v),
                         json_string_length(v) > 40 ? "..." : "");
                break;
        case JSON_TRUE:
                snprintf(buf, n, "true");
                break;
        case JSON_FALSE:
                snprintf(buf, n, "false");
                break;
        case JSON_NULL:
                snprintf(buf, n, "null");
                break;
        case JSON_OBJECT:
                snprintf(buf, n, "an object");
                break;
        case JSON_ARRAY:
                snprintf(buf, n, "an array of %zu", json_array_size(v));
                break;
        }
        return buf;
}
