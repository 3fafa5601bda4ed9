/* error.c: the error table's lookups and the rnnd_error_t helpers. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

int rnnd_error_set(rnnd_error_t *e, int code, const char *fmt, ...)
{
        va_list ap;

        if (e == NULL)
                return code;
        e->code = code;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
        return code;
}

void rnnd_error_prefix(rnnd_error_t *e, const char *fmt, ...)
{
        char head[sizeof(e->msg)];
        size_t hn, on, cap = sizeof(e->msg) - 1;
        va_list ap;

        if (e == NULL)
                return;
        va_start(ap, fmt);
        vsnprintf(head, sizeof(head) - 2, fmt, ap);
        va_end(ap);
        strcat(head, ": ");
        hn = strlen(head);
        e->msg[cap] = '\0';
        on = strlen(e->msg);
        if (hn + on > cap)
                on = hn < cap ? cap - hn : 0;
        if (hn > cap)
                hn = cap;
        memmove(e->msg + hn, e->msg, on);
        memcpy(e->msg, head, hn);
        e->msg[hn + on] = '\0';
}

const char *rnnd_strerror_name(int code)
{
        switch (code) {
#define RNND_ERRNO_NAME(name, val, status, grpc, msg)                                              \
        case RNND_##name:                                                                          \
                return #name;
                RNND_ERRNO_MAP(RNND_ERRNO_NAME)
#undef RNND_ERRNO_NAME
        }
        return "EUNKNOWN";
}

const char *rnnd_strerror(int code)
{
        switch (code) {
#define RNND_ERRNO_MSG(name, val, status, grpc, msg)                                               \
        case RNND_##name:                                                                          \
                return msg;
                RNND_ERRNO_MAP(RNND_ERRNO_MSG)
#undef RNND_ERRNO_MSG
        }
        return "unknown error";
}

int rnnd_error_http_status(int code)
{
        switch (code) {
#define RNND_ERRNO_STATUS(name, val, status, grpc, msg)                                            \
        case RNND_##name:                                                                          \
                return status;
                RNND_ERRNO_MAP(RNND_ERRNO_STATUS)
#undef RNND_ERRNO_STATUS
        }
        return 500;
}

int rnnd_error_grpc_status(int code)
{
        switch (code) {
        case 0:
                return 0;
#define RNND_ERRNO_GRPC(name, val, status, grpc, msg)                                              \
        case RNND_##name:                                                                          \
                return grpc;
                RNND_ERRNO_MAP(RNND_ERRNO_GRPC)
#undef RNND_ERRNO_GRPC
        }
        return 13;
}
