/*
 * transcript.c: the cuDNN calls that need no GPU (descriptor set-up and
 * validation), each printed with its status, one line per call.  Built twice
 * (tests/cudasim/meson.build): against the stand-in and against the real
 * libcudnn; test-transcript.sh runs both and the transcripts must be equal,
 * so the stand-in answers BAD_PARAM / NOT_SUPPORTED exactly where cuDNN does.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cudnn.h>

static void show(const char *what, cudnnStatus_t st)
{
        printf("%s: %s\n", what, cudnnGetErrorString(st));
}

static const char *dtype_name(int t)
{
        static char buf[16];

        switch (t) {
        case CUDNN_DATA_FLOAT:
                return "f32";
        case CUDNN_DATA_DOUBLE:
                return "f64";
        case CUDNN_DATA_HALF:
                return "f16";
        case CUDNN_DATA_BFLOAT16:
                return "bf16";
        case CUDNN_DATA_INT8:
                return "i8";
        case CUDNN_DATA_INT32:
                return "i32";
        default:
                snprintf(buf, sizeof(buf), "type%d", t);
                return buf;
        }
}

static void tensors(void)
{
        static const int nbs[] = {0, 1, 2, 3, 4, 5, 8, 9};
        static const int types[] = {CUDNN_DATA_FLOAT, CUDNN_DATA_HALF, CUDNN_DATA_DOUBLE,
                                    CUDNN_DATA_INT32, 99};
        cudnnTensorDescriptor_t t;
        char what[160];

        show("cudnnCreateTensorDescriptor", cudnnCreateTensorDescriptor(&t));
        for (size_t i = 0; i < sizeof(nbs) / sizeof(nbs[0]); i++) {
                int dim[9], stride[9];

                for (int k = 0; k < 9; k++)
                        dim[k] = 2;
                for (int k = 8; k >= 0; k--)
                        stride[k] = k == 8 ? 1 : stride[k + 1] * dim[k + 1];
                for (int k = 0; k < nbs[i]; k++)
                        stride[k] = stride[9 - nbs[i] + k];
                snprintf(what, sizeof(what), "SetTensorNd f32 nbDims %d", nbs[i]);
                show(what, cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, nbs[i], dim, stride));
        }
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
                int dim[3] = {2, 3, 4}, stride[3] = {12, 4, 1};

                snprintf(what, sizeof(what), "SetTensorNd %s [2,3,4]", dtype_name(types[i]));
                show(what,
                     cudnnSetTensorNdDescriptor(t, (cudnnDataType_t)types[i], 3, dim, stride));
        }
        {
                static const int bad[][6] = {
                        {0, 3, 4, 12, 4, 1},  {2, -1, 4, 12, 4, 1}, {2, 3, 4, 0, 4, 1},
                        {2, 3, 4, 12, 4, -1}, {2, 3, 4, 1, 1, 1},   {2, 3, 4, 4, 12, 1},
                        {2, 3, 4, 24, 8, 2},  {1, 1, 1, 1, 1, 1},
                };

                for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                        snprintf(what, sizeof(what),
                                 "SetTensorNd dims [%d,%d,%d] strides [%d,%d,%d]", bad[i][0],
                                 bad[i][1], bad[i][2], bad[i][3], bad[i][4], bad[i][5]);
                        show(what, cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, 3, bad[i],
                                                              bad[i] + 3));
                }
        }
        {
                int dim[3] = {6, 5, 7}, stride[3] = {35, 7, 1}, gd[3] = {0}, gs[3] = {0}, nb = 0;
                cudnnDataType_t ty = CUDNN_DATA_DOUBLE;
                cudnnStatus_t st;

                cudnnSetTensorNdDescriptor(t, CUDNN_DATA_HALF, 3, dim, stride);
                st = cudnnGetTensorNdDescriptor(t, 3, &ty, &nb, gd, gs);
                printf("GetTensorNd: %s %s nb %d dims %d %d %d strides %d %d %d\n",
                       cudnnGetErrorString(st), dtype_name(ty), nb, gd[0], gd[1], gd[2], gs[0],
                       gs[1], gs[2]);
                st = cudnnGetTensorNdDescriptor(t, 1, &ty, &nb, gd, gs);
                printf("GetTensorNd requested 1: %s nb %d\n", cudnnGetErrorString(st), nb);
        }
        show("cudnnDestroyTensorDescriptor", cudnnDestroyTensorDescriptor(t));
}

struct rnn {
        int algo, cell, bias, dir, input, type, prec, math, in, hid, proj, layers;
        unsigned aux;
};

static void rnn_case(cudnnRNNDescriptor_t d, cudnnDropoutDescriptor_t drop, const char *label,
                     struct rnn r)
{
        char what[256];
        cudnnStatus_t st;

        st = cudnnSetRNNDescriptor_v8(d, (cudnnRNNAlgo_t)r.algo, (cudnnRNNMode_t)r.cell,
                                      (cudnnRNNBiasMode_t)r.bias, (cudnnDirectionMode_t)r.dir,
                                      (cudnnRNNInputMode_t)r.input, (cudnnDataType_t)r.type,
                                      (cudnnDataType_t)r.prec, (cudnnMathType_t)r.math, r.in, r.hid,
                                      r.proj, r.layers, drop, r.aux);
        snprintf(what, sizeof(what),
                 "SetRNN_v8 %s: algo %d cell %d bias %d dir %d input %d %s/%s math %d in %d hid "
                 "%d proj %d layers %d aux %u",
                 label, r.algo, r.cell, r.bias, r.dir, r.input, dtype_name(r.type),
                 dtype_name(r.prec), r.math, r.in, r.hid, r.proj, r.layers, r.aux);
        show(what, st);
        if (st == CUDNN_STATUS_SUCCESS) {
                cudnnRNNAlgo_t algo;
                cudnnRNNMode_t cell;
                cudnnRNNBiasMode_t bias;
                cudnnDirectionMode_t dir;
                cudnnRNNInputMode_t input;
                cudnnDataType_t type, prec;
                cudnnMathType_t math;
                int32_t in, hid, proj, layers;
                cudnnDropoutDescriptor_t dd;
                uint32_t aux;

                st = cudnnGetRNNDescriptor_v8(d, &algo, &cell, &bias, &dir, &input, &type, &prec,
                                              &math, &in, &hid, &proj, &layers, &dd, &aux);
                printf("  GetRNN_v8: %s %d %d %d %d %d %s/%s %d %d %d %d %d %s %u\n",
                       cudnnGetErrorString(st), algo, cell, bias, dir, input, dtype_name(type),
                       dtype_name(prec), math, in, hid, proj, layers,
                       dd == drop ? "same-dropout" : "other-dropout", aux);
        }
}

static void rnns(void)
{
        static const int types[] = {CUDNN_DATA_FLOAT, CUDNN_DATA_HALF, CUDNN_DATA_DOUBLE,
                                    CUDNN_DATA_BFLOAT16, CUDNN_DATA_INT8};
        const struct rnn base = {CUDNN_RNN_ALGO_STANDARD,
                                 CUDNN_LSTM,
                                 CUDNN_RNN_DOUBLE_BIAS,
                                 CUDNN_UNIDIRECTIONAL,
                                 CUDNN_LINEAR_INPUT,
                                 CUDNN_DATA_FLOAT,
                                 CUDNN_DATA_FLOAT,
                                 CUDNN_FMA_MATH,
                                 8,
                                 16,
                                 16,
                                 2,
                                 CUDNN_RNN_PADDED_IO_ENABLED};
        cudnnRNNDescriptor_t d;
        cudnnDropoutDescriptor_t drop;
        struct rnn r;

        show("cudnnCreateRNNDescriptor", cudnnCreateRNNDescriptor(&d));
        show("cudnnCreateDropoutDescriptor", cudnnCreateDropoutDescriptor(&drop));
        rnn_case(d, NULL, "base", base);
        rnn_case(d, drop, "base with an unset dropout", base);
        for (int v = -1; v <= 4; v++) {
                r = base, r.algo = v;
                rnn_case(d, NULL, "algo", r);
                r = base, r.cell = v;
                rnn_case(d, NULL, "cell", r);
                r = base, r.bias = v;
                rnn_case(d, NULL, "bias", r);
                r = base, r.dir = v;
                rnn_case(d, NULL, "dir", r);
                r = base, r.input = v;
                rnn_case(d, NULL, "input", r);
                r = base, r.math = v;
                rnn_case(d, NULL, "math", r);
                r = base, r.aux = (unsigned)v;
                rnn_case(d, NULL, "aux", r);
        }
        r = base, r.input = CUDNN_SKIP_INPUT, r.in = 16;
        rnn_case(d, NULL, "skip input, in == hid", r);
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                for (size_t j = 0; j < sizeof(types) / sizeof(types[0]); j++)
                        for (int algo = 0; algo <= 3; algo++) {
                                r = base, r.type = types[i], r.prec = types[j], r.algo = algo;
                                rnn_case(d, NULL, "types", r);
                        }
        for (int cell = 0; cell <= 3; cell++)
                for (int algo = 0; algo <= 3; algo++)
                        for (int bias = 0; bias <= 3; bias++) {
                                static const int projs[] = {-1, 0, 1, 8, 16, 17};

                                for (size_t p = 0; p < sizeof(projs) / sizeof(projs[0]); p++) {
                                        r = base, r.cell = cell, r.algo = algo, r.bias = bias;
                                        r.proj = projs[p];
                                        rnn_case(d, NULL, "cell x algo x bias x proj", r);
                                }
                        }
        for (int algo = 0; algo <= 3; algo++) {
                static const int sizes[][3] = {{0, 16, 1},   {8, 0, 1},   {8, 16, 0},
                                               {-1, 16, 1},  {8, 16, -1}, {8, 4096, 1},
                                               {8, 2048, 1}, {8, 16, 100}};

                for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                        r = base, r.algo = algo, r.in = sizes[s][0], r.hid = sizes[s][1];
                        r.proj = sizes[s][1], r.layers = sizes[s][2];
                        rnn_case(d, NULL, "sizes", r);
                }
                for (int dir = 0; dir <= 1; dir++)
                        for (int math = 0; math <= 3; math++) {
                                r = base, r.algo = algo, r.dir = dir, r.math = math;
                                r.type = CUDNN_DATA_HALF;
                                rnn_case(d, NULL, "half data", r);
                        }
        }
        show("cudnnDestroyDropoutDescriptor", cudnnDestroyDropoutDescriptor(drop));
        show("cudnnDestroyRNNDescriptor", cudnnDestroyRNNDescriptor(d));
}

static void data_case(cudnnRNNDataDescriptor_t d, const char *label, int type, int layout, int T,
                      int B, int V, const int *len, bool fill)
{
        char what[256];
        float f32 = -7.0f;
        double f64 = -7.0;
        uint16_t f16 = 0xc700; /* -7 */
        void *pf = !fill                       ? NULL
                   : type == CUDNN_DATA_DOUBLE ? (void *)&f64
                   : type == CUDNN_DATA_FLOAT  ? (void *)&f32
                                               : (void *)&f16;
        cudnnStatus_t st;
        int n = 0;

        char lens[64] = "NULL";

        for (int b = 0; len != NULL && b < B && b < 4; b++)
                n += snprintf(lens + n, sizeof(lens) - (size_t)n, "%s%d", b ? "," : "", len[b]);
        snprintf(what, sizeof(what), "SetRNNData %s: %s layout %d T %d B %d V %d len %s%s", label,
                 dtype_name(type), layout, T, B, V, lens, fill ? " fill" : "");
        st = cudnnSetRNNDataDescriptor(d, (cudnnDataType_t)type, (cudnnRNNDataLayout_t)layout, T, B,
                                       V, len, pf);
        show(what, st);
        if (st == CUDNN_STATUS_SUCCESS) {
                cudnnDataType_t gt;
                cudnnRNNDataLayout_t gl;
                int gT, gB, gV, glen[8] = {0};
                float gfill = 0.0f;
                double gfill64 = 0.0;
                uint16_t gfill16 = 0;
                void *gf = type == CUDNN_DATA_DOUBLE  ? (void *)&gfill64
                           : type == CUDNN_DATA_FLOAT ? (void *)&gfill
                                                      : (void *)&gfill16;

                st = cudnnGetRNNDataDescriptor(d, &gt, &gl, &gT, &gB, &gV, B < 8 ? B : 8, glen, gf);
                printf("  GetRNNData: %s %s %d %d %d %d len %d %d fill %g %g %04x\n",
                       cudnnGetErrorString(st), dtype_name(gt), gl, gT, gB, gV, glen[0],
                       glen[B > 1 ? 1 : 0], gfill, gfill64, gfill16);
        }
}

static void datas(void)
{
        static const int types[] = {CUDNN_DATA_FLOAT,    CUDNN_DATA_HALF, CUDNN_DATA_DOUBLE,
                                    CUDNN_DATA_BFLOAT16, CUDNN_DATA_INT8, CUDNN_DATA_INT32};
        static const int desc[] = {5, 3, 3, 1}, asc[] = {1, 3, 3, 5}, zero[] = {5, 3, 0, 1};
        static const int big[] = {5, 6, 3, 1}, neg[] = {5, -1, 3, 1}, full[] = {5, 5, 5, 5};
        cudnnRNNDataDescriptor_t d;

        show("cudnnCreateRNNDataDescriptor", cudnnCreateRNNDataDescriptor(&d));
        for (int layout = -1; layout <= 3; layout++) {
                data_case(d, "sorted", CUDNN_DATA_FLOAT, layout, 5, 4, 8, desc, true);
                data_case(d, "sorted, no fill", CUDNN_DATA_FLOAT, layout, 5, 4, 8, desc, false);
                data_case(d, "ascending", CUDNN_DATA_FLOAT, layout, 5, 4, 8, asc, true);
                data_case(d, "a zero", CUDNN_DATA_FLOAT, layout, 5, 4, 8, zero, true);
                data_case(d, "over T", CUDNN_DATA_FLOAT, layout, 5, 4, 8, big, true);
                data_case(d, "negative", CUDNN_DATA_FLOAT, layout, 5, 4, 8, neg, true);
                data_case(d, "T over the longest", CUDNN_DATA_FLOAT, layout, 7, 4, 8, desc, true);
                data_case(d, "all full", CUDNN_DATA_FLOAT, layout, 5, 4, 8, full, true);
                data_case(d, "NULL lengths", CUDNN_DATA_FLOAT, layout, 5, 4, 8, NULL, true);
        }
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                for (int layout = 0; layout <= 2; layout++)
                        data_case(d, "types", types[i], layout, 5, 4, 8, desc, true);
        {
                static const int sizes[][3] = {{0, 4, 8},     {5, 0, 8},     {5, 4, 0},
                                               {-1, 4, 8},    {65535, 4, 8}, {65536, 4, 8},
                                               {70000, 4, 8}, {5, 4, 100000}};
                static int lens[4] = {1, 1, 1, 1};

                for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
                        for (int layout = 0; layout <= 2; layout++)
                                data_case(d, "sizes", CUDNN_DATA_FLOAT, layout, sizes[s][0],
                                          sizes[s][1], sizes[s][2], lens, true);
        }
        show("cudnnDestroyRNNDataDescriptor", cudnnDestroyRNNDataDescriptor(d));
}

static void errors(void)
{
        static const int codes[] = {0,    1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 2000,
                                    2002, 2003, 2004, 2005, 2006, 2007, 2008, 2009, 2010, 2011,
                                    2012, 3000, 3001, 3002, 3003, 3004, 3005, 3006, 3007, 3008,
                                    3009, 3010, 3011, 3012, 3013, 3014, 4000, 4001, 4002, 4003,
                                    4004, 4005, 4006, 5000, 5001, 5002, 5003, 5004};

        for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
                printf("cudnnGetErrorString(%d): %s\n", codes[i],
                       cudnnGetErrorString((cudnnStatus_t)codes[i]));
}

int main(void)
{
        printf("cudnnGetVersion: %zu\n", cudnnGetVersion());
        errors();
        tensors();
        rnns();
        datas();
        return 0;
}
