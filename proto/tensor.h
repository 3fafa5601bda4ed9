/*
 * tensor.h: element types shared by the wire formats (KServe v2, safetensors)
 * and the engine, and the float conversions between them.
 */
#ifndef RNND_PROTO_TENSOR_H
#define RNND_PROTO_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#define RNND_MAX_DIMS 8

#define RNND_ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

/*
 * XX(enum suffix, KServe v2 name, safetensors name, element bytes).
 * BYTES has no fixed size (0).
 */
#define RNND_DTYPE_MAP(XX)                                                                         \
        XX(BOOL, "BOOL", "BOOL", 1)                                                                \
        XX(U8, "UINT8", "U8", 1)                                                                   \
        XX(U16, "UINT16", "U16", 2)                                                                \
        XX(U32, "UINT32", "U32", 4)                                                                \
        XX(U64, "UINT64", "U64", 8)                                                                \
        XX(I8, "INT8", "I8", 1)                                                                    \
        XX(I16, "INT16", "I16", 2)                                                                 \
        XX(I32, "INT32", "I32", 4)                                                                 \
        XX(I64, "INT64", "I64", 8)                                                                 \
        XX(F16, "FP16", "F16", 2)                                                                  \
        XX(BF16, "BF16", "BF16", 2)                                                                \
        XX(F32, "FP32", "F32", 4)                                                                  \
        XX(F64, "FP64", "F64", 8)                                                                  \
        XX(BYTES, "BYTES", "BYTES", 0)

typedef enum rnnd_dtype {
        RNND_DT_INVALID = 0,
#define RNND_DTYPE_ENUM(e, kname, stname, size) RNND_DT_##e,
        RNND_DTYPE_MAP(RNND_DTYPE_ENUM)
#undef RNND_DTYPE_ENUM
                RNND_DT_COUNT
} rnnd_dtype_t;

/* KServe v2 name of dt ("FP32"), or "INVALID".  Borrowed, static.  Thread-safe. */
const char *rnnd_dtype_name(rnnd_dtype_t dt);

/* The dtype with KServe v2 name s, or RNND_DT_INVALID.  Thread-safe. */
rnnd_dtype_t rnnd_dtype_from_name(const char *s);

/* The dtype with safetensors name s ("F32"), or RNND_DT_INVALID.  Thread-safe. */
rnnd_dtype_t rnnd_dtype_from_st_name(const char *s);

/* Safetensors name of dt ("F32"), or "INVALID".  Borrowed, static.  Thread-safe. */
const char *rnnd_dtype_st_name(rnnd_dtype_t dt);

/* Bytes per element (0 for BYTES and INVALID).  Thread-safe. */
size_t rnnd_dtype_size(rnnd_dtype_t dt);

/* A float's IEEE bits, and the float of bits u.  Thread-safe. */
uint32_t rnnd_f32_bits(float f);
float rnnd_f32_from_bits(uint32_t u);

/* IEEE half and bfloat16 to and from float, round to nearest even.  Thread-safe. */
float rnnd_f16_to_f32(uint16_t h);
uint16_t rnnd_f32_to_f16(float f);
float rnnd_bf16_to_f32(uint16_t b);
uint16_t rnnd_f32_to_bf16(float f);

/*
 * Multiplies the n dims of shape into *ret (the element count).  Returns 0, or
 * RNND_ELIMIT when the product would pass max.  Never writes *ret on failure.
 */
int rnnd_shape_numel(const uint64_t *shape, unsigned n, uint64_t max, uint64_t *ret);

/*
 * Writes the ndim dims of shape into buf[cap] as "[2, 5, 7]" for messages,
 * cut short when it does not fit (cap > 0).  Returns buf.  Thread-safe.
 */
const char *rnnd_shape_format(char *buf, size_t cap, const uint64_t *shape, unsigned ndim);

#endif
