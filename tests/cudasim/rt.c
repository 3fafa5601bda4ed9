/*
 * rt.c: the stand-in's CUDA runtime (tests/cudasim/README.md): fake devices
 * with guarded arenas, pinned host memory, streams whose work runs late on a
 * thread of their own, events, the per-thread last error and the sticky
 * device fault, and the fault injection of cudasim.h.
 *
 * Device memory is tagged with a memory protection key per device
 * (pkey_mprotect): only the stand-in's stream threads, which enable their
 * device's key, can touch it, so host code that dereferences a device
 * pointer faults as it would on a GPU.  Without PKU the arena is plain
 * memory (a warning says so).
 */
#include <errno.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"

#define MAGIC_STREAM 0x5354524du
#define MAGIC_EVENT  0x45564e54u
#define MAGIC_DEAD   0xdeadu
#define PAGE         4096u
#define DEFAULT_MEM  (80ull << 30) /* an H100: only written memory costs RAM */
#define MAX_PINNED   4096

struct alloc {
        size_t off, span; /* pages from the arena's base, guard page included */
        char *user;
        size_t size;
};

struct device {
        size_t total, used;
        char *base;
        size_t cap; /* pages reserved */
        int pkey;
        struct alloc *allocs;
        size_t n_allocs, max_allocs;
        size_t next_fit; /* page where the next search starts */
        uint64_t n_malloc, n_free, oom_at;
        struct sim_stream *streams; /* the live ones, the legacy one included */
        struct sim_stream *legacy;
        pthread_mutex_t mu;
};

struct event {
        unsigned magic, flags;
        struct sim_stream *stream;
        uint64_t seq;  /* of the last record */
        int64_t time;  /* when that record ran */
        bool recorded; /* ever recorded */
};

struct pinned {
        char *p;
        size_t len;
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct device devs[SIM_MAX_DEVICES];
static int n_devs;
static int64_t delay_ns = 20 * 1000 * 1000;
static bool trace; /* RNND_CUDASIM_TRACE: say when work ran without a synchronisation */
static bool have_pku;
static pthread_mutex_t pinned_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pinned pinned[MAX_PINNED];
static size_t n_pinned;
static pthread_mutex_t sticky_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int sticky;
static _Atomic uint64_t n_launch, fault_at, fail_at;
static struct sim_stream *dead_streams; /* destroyed handles stay recognisable */
static struct sigaction old_segv, old_bus;

static __thread int cur_dev;
static __thread cudaError_t last_err;
static __thread sigjmp_buf *op_jmp; /* set while a stream thread runs an op */
static __thread void *fault_addr;
static __thread cudaError_t fault_err;

int64_t sim_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static size_t parse_size(const char *s, char **end)
{
        unsigned long long v = strtoull(s, end, 10);

        switch (**end) {
        case 'G':
        case 'g':
                v <<= 30;
                (*end)++;
                break;
        case 'M':
        case 'm':
                v <<= 20;
                (*end)++;
                break;
        case 'K':
        case 'k':
                v <<= 10;
                (*end)++;
                break;
        default:
                break;
        }
        return (size_t)v;
}

static void die(const char *what)
{
        fprintf(stderr, "cudasim: %s\n", what);
        abort();
}

/* A host thread touched device memory: say so, then let the fault take its course. */
static void on_segv(int sig, siginfo_t *si, void *uc)
{
        struct sigaction *old = sig == SIGSEGV ? &old_segv : &old_bus;
        size_t len;

        /* Inside queued work (a kernel, a GEMM, an RNN): a device fault, not a crash. */
        if (op_jmp != NULL) {
                fault_addr = si->si_addr;
                fault_err = cudaErrorIllegalAddress;
                siglongjmp(*op_jmp, 1);
        }

        if (sim_dev_of(si->si_addr, &len) >= 0) {
                static const char msg[] = "cudasim: host code dereferenced a device pointer "
                                          "(device memory is not host-accessible)\n";

                if (write(2, msg, sizeof(msg) - 1) < 0) {
                }
        }
        if (old->sa_flags & SA_SIGINFO) {
                old->sa_sigaction(sig, si, uc);
        } else if (old->sa_handler != SIG_IGN && old->sa_handler != SIG_DFL) {
                old->sa_handler(sig);
        } else {
                signal(sig, SIG_DFL);
                raise(sig);
        }
}

/*
 * Poisoned memory without writing it: private mappings of one file of 0xff
 * bytes.  Pages nobody wrote are the file's shared pages, so a device's
 * untouched memory costs neither time nor RAM, and reads as poison.
 */
#define POISON_CHUNK (64u << 20)
static int poison_fd = -1;

static void init_poison(void)
{
        static char buf[1 << 16];

        poison_fd = memfd_create("cudasim-poison", MFD_CLOEXEC);
        if (poison_fd < 0 || ftruncate(poison_fd, POISON_CHUNK) != 0)
                goto fail;
        memset(buf, SIM_POISON, sizeof(buf));
        for (size_t o = 0; o < POISON_CHUNK; o += sizeof(buf))
                if (pwrite(poison_fd, buf, sizeof(buf), (off_t)o) != (ssize_t)sizeof(buf))
                        goto fail;
        return;
fail:
        if (poison_fd >= 0)
                close(poison_fd);
        poison_fd = -1; /* then allocations are written with the poison */
}

/* Maps poison read-write over [p, p + len) (page-aligned, reserved); false on failure. */
static bool map_poison(char *p, size_t len)
{
        if (poison_fd < 0) {
                if (mprotect(p, len, PROT_READ | PROT_WRITE) != 0)
                        return false;
                memset(p, SIM_POISON, len);
                return true;
        }
        for (size_t o = 0; o < len; o += POISON_CHUNK) {
                size_t n = len - o < POISON_CHUNK ? len - o : POISON_CHUNK;

                if (mmap(p + o, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, poison_fd, 0) ==
                    MAP_FAILED)
                        return false;
        }
        return true;
}

/* Gives [p, p + len) back to the reservation: inaccessible, no memory behind it. */
static void unmap_to_reserve(char *p, size_t len)
{
        mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

static void init_device(struct device *d, size_t total)
{
        d->total = total;
        d->cap = (total / PAGE) * 2 + (256u << 20) / PAGE;
        d->base = mmap(NULL, d->cap * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (d->base == MAP_FAILED)
                die("cannot reserve a device arena");
        d->pkey = -1;
        if (have_pku) {
                d->pkey = pkey_alloc(0, PKEY_DISABLE_ACCESS);
                if (d->pkey < 0)
                        d->pkey = devs[0].pkey; /* out of keys: share the first one */
        }
        pthread_mutex_init(&d->mu, NULL);
}

static void init(void)
{
        const char *env = getenv("RNND_CUDASIM_DEVICES"), *vis = getenv("CUDA_VISIBLE_DEVICES");
        size_t phys[SIM_MAX_DEVICES];
        int n_phys = 0;
        struct sigaction sa;
        char *end;

        if (env != NULL && *env != '\0') {
                const char *p = env;
                size_t v = parse_size(p, &end);

                if (*end == '\0' && strpbrk(p, "GgMmKk") == NULL && v <= SIM_MAX_DEVICES) {
                        for (n_phys = 0; n_phys < (int)v; n_phys++)
                                phys[n_phys] = DEFAULT_MEM;
                } else {
                        while (*p != '\0' && n_phys < SIM_MAX_DEVICES) {
                                phys[n_phys++] = parse_size(p, &end);
                                if (*end != ',' && *end != '\0')
                                        die("RNND_CUDASIM_DEVICES: want \"4G,1G\" or a count");
                                p = *end == ',' ? end + 1 : end;
                        }
                }
        } else {
                phys[n_phys++] = DEFAULT_MEM;
        }

        {
                int k = pkey_alloc(0, PKEY_DISABLE_ACCESS);

                have_pku = k >= 0;
                if (have_pku)
                        pkey_free(k);
                else
                        fprintf(stderr,
                                "cudasim: no memory protection keys (%s): device memory "
                                "is host-readable on this machine\n",
                                strerror(errno));
        }

        init_poison();

        /* CUDA_VISIBLE_DEVICES: a list of indices; the list ends at the first bad one. */
        if (vis != NULL) {
                const char *p = vis;

                while (*p != '\0' && n_devs < SIM_MAX_DEVICES) {
                        long i = strtol(p, &end, 10);

                        if (end == p || i < 0 || i >= n_phys)
                                break;
                        init_device(&devs[n_devs++], phys[i]);
                        if (*end != ',')
                                break;
                        p = end + 1;
                }
        } else {
                for (int i = 0; i < n_phys; i++)
                        init_device(&devs[n_devs++], phys[i]);
        }

        trace = getenv("RNND_CUDASIM_TRACE") != NULL;
        env = getenv("RNND_CUDASIM_DELAY_US");
        if (env != NULL)
                delay_ns = (int64_t)strtoll(env, NULL, 10) * 1000;
        env = getenv("RNND_CUDASIM_FAULT");
        if (env != NULL)
                fault_at = strtoull(env, NULL, 10);
        env = getenv("RNND_CUDASIM_LAUNCH_FAIL");
        if (env != NULL)
                fail_at = strtoull(env, NULL, 10);
        env = getenv("RNND_CUDASIM_OOM");
        if (env != NULL) {
                long d = strtol(env, &end, 10);

                if (*end != ':' || d < 0 || d >= n_devs)
                        fprintf(stderr, "cudasim: RNND_CUDASIM_OOM=%s: want D:N with D a device\n",
                                env);
                else
                        devs[d].oom_at = strtoull(end + 1, NULL, 10);
        }

        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &old_segv);
        sigaction(SIGBUS, &sa, &old_bus);
}

int sim_device_count(void)
{
        pthread_once(&once, init);
        return n_devs;
}

int sim_current_device(void)
{
        return cur_dev;
}

static void grant_key(int key)
{
        if (have_pku && key >= 0)
                pkey_set(key, 0);
}

void sim_grant(int dev)
{
        grant_key(devs[dev].pkey);
}

void sim_grant_all(void)
{
        for (int i = 0; i < n_devs; i++)
                grant_key(devs[i].pkey);
}

static void revoke_key(int key)
{
        if (have_pku && key >= 0)
                pkey_set(key, PKEY_DISABLE_ACCESS);
}

/* ---- errors ---- */

static cudaError_t fail(cudaError_t e)
{
        if (e != cudaSuccess)
                last_err = e;
        return e;
}

cudaError_t cudasim_set_last(cudaError_t e)
{
        return fail(e);
}

cudaError_t sim_sticky(void)
{
        return (cudaError_t)atomic_load(&sticky);
}

void sim_set_sticky(cudaError_t err, const char *why, ...)
{
        va_list ap;

        pthread_mutex_lock(&sticky_mu);
        if (atomic_load(&sticky) == cudaSuccess) {
                atomic_store(&sticky, (int)err);
                fprintf(stderr, "cudasim: device fault (%s, sticky for the process): ",
                        cudaGetErrorName(err));
                va_start(ap, why);
                vfprintf(stderr, why, ap);
                va_end(ap);
                fputc('\n', stderr);
        }
        pthread_mutex_unlock(&sticky_mu);
}

/* Every runtime call starts here: devices found, the sticky error first. */
#define ENTER()                                                                                    \
        do {                                                                                       \
                pthread_once(&once, init);                                                         \
                if (sim_sticky() != cudaSuccess)                                                   \
                        return fail(sim_sticky());                                                 \
        } while (0)

cudaError_t cudaGetLastError(void)
{
        cudaError_t e = last_err;

        pthread_once(&once, init);
        if (sim_sticky() != cudaSuccess)
                return sim_sticky();
        last_err = cudaSuccess;
        return e;
}

cudaError_t cudaPeekAtLastError(void)
{
        pthread_once(&once, init);
        if (sim_sticky() != cudaSuccess)
                return sim_sticky();
        return last_err;
}

static const struct {
        cudaError_t e;
        const char *name, *msg;
} errors[] = {
        {cudaSuccess, "cudaSuccess", "no error"},
        {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
        {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
        {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
        {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
        {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
         "too many resources requested for launch"},
        {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
         "invalid configuration argument"},
        {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
        {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
        {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
         "invalid resource handle"},
        {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
        {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
         "an illegal memory access was encountered"},
        {cudaErrorIllegalInstruction, "cudaErrorIllegalInstruction",
         "an illegal instruction was encountered"},
        {cudaErrorAssert, "cudaErrorAssert", "device-side assert triggered"},
        {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
        {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
         "invalid copy direction for memcpy"},
};

const char *cudaGetErrorName(cudaError_t e)
{
        for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
                if (errors[i].e == e)
                        return errors[i].name;
        return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
        for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
                if (errors[i].e == e)
                        return errors[i].msg;
        return "unrecognized error code";
}

/* ---- devices ---- */

cudaError_t cudaRuntimeGetVersion(int *v)
{
        if (v == NULL)
                return fail(cudaErrorInvalidValue);
        *v = CUDART_VERSION;
        return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
        if (v == NULL)
                return fail(cudaErrorInvalidValue);
        *v = CUDART_VERSION;
        return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n)
{
        pthread_once(&once, init);
        if (n == NULL)
                return fail(cudaErrorInvalidValue);
        *n = n_devs;
        return n_devs == 0 ? fail(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
        ENTER();
        if (n_devs == 0)
                return fail(cudaErrorNoDevice);
        if (d < 0 || d >= n_devs)
                return fail(cudaErrorInvalidDevice);
        cur_dev = d;
        return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
        ENTER();
        if (d == NULL)
                return fail(cudaErrorInvalidValue);
        if (n_devs == 0)
                return fail(cudaErrorNoDevice);
        *d = cur_dev;
        return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
        ENTER();
        if (p == NULL)
                return fail(cudaErrorInvalidValue);
        if (n_devs == 0)
                return fail(cudaErrorNoDevice);
        if (d < 0 || d >= n_devs)
                return fail(cudaErrorInvalidDevice);
        memset(p, 0, sizeof(*p));
        snprintf(p->name, sizeof(p->name), "cudasim GPU %d (CPU stand-in, %zu MiB)", d,
                 devs[d].total >> 20);
        p->totalGlobalMem = devs[d].total;
        p->sharedMemPerBlock = 48 << 10;
        p->sharedMemPerBlockOptin = 227 << 10;
        p->sharedMemPerMultiprocessor = 228 << 10;
        p->regsPerBlock = 65536;
        p->regsPerMultiprocessor = 65536;
        p->warpSize = 32;
        p->maxThreadsPerBlock = 1024;
        p->maxThreadsDim[0] = 1024;
        p->maxThreadsDim[1] = 1024;
        p->maxThreadsDim[2] = 64;
        p->maxGridSize[0] = 0x7fffffff;
        p->maxGridSize[1] = 65535;
        p->maxGridSize[2] = 65535;
        p->major = 9;
        p->minor = 0;
        p->multiProcessorCount = 132;
        p->maxThreadsPerMultiProcessor = 2048;
        p->maxBlocksPerMultiProcessor = 32;
        p->l2CacheSize = 50 << 20;
        p->memoryBusWidth = 5120;
        p->concurrentKernels = 1;
        p->asyncEngineCount = 2;
        p->unifiedAddressing = 1;
        p->canMapHostMemory = 1;
        p->pciBusID = 0x10 + d;
        p->memoryPoolsSupported = 1;
        return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d)
{
        struct cudaDeviceProp p;
        cudaError_t e;

        if (v == NULL)
                return fail(cudaErrorInvalidValue);
        e = cudaGetDeviceProperties(&p, d);
        if (e != cudaSuccess)
                return e;
        switch (a) {
        case cudaDevAttrComputeCapabilityMajor:
                *v = p.major;
                break;
        case cudaDevAttrComputeCapabilityMinor:
                *v = p.minor;
                break;
        case cudaDevAttrMultiProcessorCount:
                *v = p.multiProcessorCount;
                break;
        case cudaDevAttrMaxThreadsPerBlock:
                *v = p.maxThreadsPerBlock;
                break;
        case cudaDevAttrWarpSize:
                *v = p.warpSize;
                break;
        case cudaDevAttrMaxSharedMemoryPerBlock:
                *v = (int)p.sharedMemPerBlock;
                break;
        case cudaDevAttrMaxGridDimX:
                *v = p.maxGridSize[0];
                break;
        case cudaDevAttrMaxGridDimY:
                *v = p.maxGridSize[1];
                break;
        case cudaDevAttrMaxGridDimZ:
                *v = p.maxGridSize[2];
                break;
        case cudaDevAttrMaxBlockDimX:
                *v = p.maxThreadsDim[0];
                break;
        case cudaDevAttrMaxBlockDimY:
                *v = p.maxThreadsDim[1];
                break;
        case cudaDevAttrMaxBlockDimZ:
                *v = p.maxThreadsDim[2];
                break;
        case cudaDevAttrUnifiedAddressing:
                *v = 1;
                break;
        default:
                return fail(cudaErrorInvalidValue);
        }
        return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
        struct device *d;

        ENTER();
        if (n_devs == 0)
                return fail(cudaErrorNoDevice);
        d = &devs[cur_dev];
        pthread_mutex_lock(&d->mu);
        if (free_b != NULL)
                *free_b = d->total - d->used;
        if (total_b != NULL)
                *total_b = d->total;
        pthread_mutex_unlock(&d->mu);
        return cudaSuccess;
}

/* ---- device memory ---- */

int sim_dev_of(const void *p, size_t *len)
{
        const char *c = p;

        for (int i = 0; i < n_devs; i++) {
                struct device *d = &devs[i];

                if (c >= d->base && c < d->base + d->cap * PAGE) {
                        int r = i;

                        *len = 0;
                        pthread_mutex_lock(&d->mu);
                        for (size_t k = 0; k < d->n_allocs; k++) {
                                const struct alloc *a = &d->allocs[k];

                                if (c >= a->user && c < a->user + a->size) {
                                        *len = (size_t)(a->user + a->size - c);
                                        break;
                                }
                        }
                        pthread_mutex_unlock(&d->mu);
                        return r;
                }
        }
        return -1;
}

bool sim_is_pinned(const void *p, size_t n)
{
        const char *c = p;
        bool ok = false;

        pthread_mutex_lock(&pinned_mu);
        for (size_t i = 0; i < n_pinned && !ok; i++)
                ok = c >= pinned[i].p && n <= pinned[i].len &&
                     (size_t)(c - pinned[i].p) <= pinned[i].len - n;
        pthread_mutex_unlock(&pinned_mu);
        return ok;
}

bool sim_reachable(int dev, const void *p, size_t n)
{
        size_t len;
        int d = sim_dev_of(p, &len);

        if (d >= 0)
                return d == dev && len >= n && len > 0;
        return sim_is_pinned(p, n);
}

/* First fit from next_fit (then from 0) for span pages; returns the page or SIZE_MAX. */
static size_t find_gap(struct device *d, size_t span, size_t *at)
{
        for (int pass = 0; pass < 2; pass++) {
                size_t from = pass == 0 ? d->next_fit : 0, prev_end = 0;

                for (size_t k = 0; k <= d->n_allocs; k++) {
                        size_t start = k < d->n_allocs ? d->allocs[k].off : d->cap;
                        size_t lo = prev_end > from ? prev_end : from;

                        if (start >= lo && start - lo >= span) {
                                *at = k;
                                return lo;
                        }
                        if (k < d->n_allocs)
                                prev_end = d->allocs[k].off + d->allocs[k].span;
                }
        }
        return SIZE_MAX;
}

cudaError_t cudaMalloc(void **ptr, size_t size)
{
        struct device *d;
        size_t rounded, pages, off, at;
        char *user;

        ENTER();
        if (ptr == NULL)
                return fail(cudaErrorInvalidValue);
        if (n_devs == 0)
                return fail(cudaErrorNoDevice);
        if (size == 0) {
                *ptr = NULL;
                return cudaSuccess;
        }
        d = &devs[cur_dev];
        rounded = (size + 255) & ~(size_t)255;
        if (rounded < size)
                return fail(cudaErrorMemoryAllocation);
        pages = (rounded + PAGE - 1) / PAGE;
        pthread_mutex_lock(&d->mu);
        if ((d->oom_at != 0 && d->n_malloc + 1 == d->oom_at) || pages > d->cap ||
            d->used + pages * PAGE > d->total) {
                if (d->oom_at != 0 && d->n_malloc + 1 == d->oom_at)
                        d->oom_at = 0;
                pthread_mutex_unlock(&d->mu);
                return fail(cudaErrorMemoryAllocation);
        }
        off = find_gap(d, pages + 1, &at);
        if (off == SIZE_MAX ||
            (d->n_allocs == d->max_allocs &&
             !(d->max_allocs = d->max_allocs ? d->max_allocs * 2 : 64,
               d->allocs = realloc(d->allocs, d->max_allocs * sizeof(*d->allocs))))) {
                pthread_mutex_unlock(&d->mu);
                return fail(cudaErrorMemoryAllocation);
        }
        user = d->base + (off + pages) * PAGE - rounded;
        if (!map_poison(d->base + off * PAGE, pages * PAGE) ||
            (have_pku && pkey_mprotect(d->base + off * PAGE, pages * PAGE, PROT_READ | PROT_WRITE,
                                       d->pkey) != 0)) {
                unmap_to_reserve(d->base + off * PAGE, pages * PAGE);
                pthread_mutex_unlock(&d->mu);
                return fail(cudaErrorMemoryAllocation);
        }
        memmove(&d->allocs[at + 1], &d->allocs[at], (d->n_allocs - at) * sizeof(*d->allocs));
        d->allocs[at] = (struct alloc){off, pages + 1, user, size};
        d->n_allocs++;
        d->next_fit = off + pages + 1;
        d->used += pages * PAGE;
        d->n_malloc++;
        pthread_mutex_unlock(&d->mu);
        *ptr = user;
        return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
        struct sim_stream *list[256];
        struct device *d;
        size_t n = 0;
        cudaError_t e = cudaSuccess;

        ENTER();
        if (n_devs == 0)
                return fail(cudaErrorNoDevice);
        d = &devs[cur_dev];
        pthread_mutex_lock(&d->mu);
        for (struct sim_stream *s = d->streams; s != NULL && n < 256; s = s->next_of_dev)
                list[n++] = s;
        pthread_mutex_unlock(&d->mu);
        for (size_t i = 0; i < n; i++)
                if (sim_stream_sync(list[i]) != cudaSuccess)
                        e = sim_sticky();
        return fail(e);
}

cudaError_t cudaFree(void *p)
{
        struct device *d;
        size_t len;
        int di;
        cudaError_t e;

        ENTER();
        if (p == NULL)
                return cudaSuccess;
        di = sim_dev_of(p, &len);
        if (di < 0)
                return fail(cudaErrorInvalidValue);
        /* cudaFree synchronises: the device's queued work runs first. */
        {
                int saved = cur_dev;

                cur_dev = di;
                e = cudaDeviceSynchronize();
                cur_dev = saved;
                if (e != cudaSuccess)
                        return e;
        }
        d = &devs[di];
        pthread_mutex_lock(&d->mu);
        for (size_t k = 0; k < d->n_allocs; k++) {
                struct alloc *a = &d->allocs[k];

                if (a->user == p) {
                        size_t pages = a->span - 1;

                        unmap_to_reserve(d->base + a->off * PAGE, pages * PAGE);
                        d->used -= pages * PAGE;
                        memmove(a, a + 1, (d->n_allocs - k - 1) * sizeof(*a));
                        d->n_allocs--;
                        d->n_free++;
                        pthread_mutex_unlock(&d->mu);
                        return cudaSuccess;
                }
        }
        pthread_mutex_unlock(&d->mu);
        return fail(cudaErrorInvalidValue); /* inside an allocation, not its start */
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
        size_t len = (size + PAGE - 1) / PAGE * PAGE;
        char *p;

        ENTER();
        if (ptr == NULL)
                return fail(cudaErrorInvalidValue);
        if (n_devs == 0)
                return fail(cudaErrorNoDevice);
        if (size == 0) {
                *ptr = NULL;
                return cudaSuccess;
        }
        p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
                return fail(cudaErrorMemoryAllocation);
        if (!map_poison(p, len)) {
                munmap(p, len);
                return fail(cudaErrorMemoryAllocation);
        }
        pthread_mutex_lock(&pinned_mu);
        if (n_pinned == MAX_PINNED) {
                pthread_mutex_unlock(&pinned_mu);
                munmap(p, len);
                return fail(cudaErrorMemoryAllocation);
        }
        pinned[n_pinned++] = (struct pinned){p, size};
        pthread_mutex_unlock(&pinned_mu);
        *ptr = p;
        return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
        ENTER();
        if (p == NULL)
                return cudaSuccess;
        for (int i = 0; i < n_devs; i++) {
                int saved = cur_dev;
                cudaError_t e;

                cur_dev = i;
                e = cudaDeviceSynchronize();
                cur_dev = saved;
                if (e != cudaSuccess)
                        return e;
        }
        pthread_mutex_lock(&pinned_mu);
        for (size_t i = 0; i < n_pinned; i++) {
                if (pinned[i].p == p) {
                        size_t len = (pinned[i].len + PAGE - 1) / PAGE * PAGE;

                        pinned[i] = pinned[--n_pinned];
                        pthread_mutex_unlock(&pinned_mu);
                        munmap(p, len);
                        return cudaSuccess;
                }
        }
        pthread_mutex_unlock(&pinned_mu);
        return fail(cudaErrorInvalidValue);
}

/* ---- streams ---- */

void sim_fault_jump(cudaError_t err)
{
        if (op_jmp == NULL)
                abort();
        fault_addr = NULL;
        fault_err = err;
        siglongjmp(*op_jmp, 1);
}

/* Runs one op, turning a fault inside it into the sticky error. */
static cudaError_t run_op(struct sim_op *op)
{
        sigjmp_buf jb;
        volatile cudaError_t e = sim_sticky();

        if (e != cudaSuccess)
                return e;
        if (op->fault) {
                sim_set_sticky(cudaErrorIllegalAddress, "%s: %s", op->what,
                               op->fault_why != NULL ? op->fault_why
                                                     : "the injected fault (RNND_CUDASIM_FAULT)");
                return cudaErrorIllegalAddress;
        }
        if (sigsetjmp(jb, 1) == 0) {
                op_jmp = &jb;
                e = op->fn(op);
        } else {
                sim_grant(op->stream->dev); /* the signal handler's PKRU denied it */
                if (fault_addr != NULL)
                        sim_set_sticky(fault_err, "%s at address %p", op->what, fault_addr);
                else
                        sim_set_sticky(fault_err, "%s", op->what);
                e = fault_err;
        }
        op_jmp = NULL;
        if (e != cudaSuccess && sim_sticky() == cudaSuccess)
                sim_set_sticky(e, "%s failed", op->what);
        return e;
}

static void *stream_main(void *arg)
{
        struct sim_stream *s = arg;

        sim_grant(s->dev);
        pthread_mutex_lock(&s->mu);
        for (;;) {
                struct sim_op *op = s->head;

                if (op == NULL) {
                        if (s->stop)
                                break;
                        pthread_cond_wait(&s->cv, &s->mu);
                        continue;
                }
                if (op->seq > s->released && !s->stop) {
                        int64_t now = sim_now_ns();

                        if (now < op->due_ns) {
                                struct timespec ts = {op->due_ns / 1000000000,
                                                      op->due_ns % 1000000000};

                                pthread_cond_timedwait(&s->cv, &s->mu, &ts);
                                continue;
                        }
                }
                if (trace && op->seq > s->released)
                        fprintf(stderr, "cudasim: %s ran %lld us late without a synchronisation\n",
                                op->what, (long long)(delay_ns / 1000));
                s->head = op->next;
                if (s->head == NULL)
                        s->tail = NULL;
                pthread_mutex_unlock(&s->mu);
                run_op(op); /* its error is the process's sticky one now */
                if (op->free != NULL)
                        op->free(op);
                pthread_mutex_lock(&s->mu);
                s->completed = op->seq;
                free(op);
                pthread_cond_broadcast(&s->cv);
        }
        pthread_mutex_unlock(&s->mu);
        sim_kernel_thread_done();
        return NULL;
}

static struct sim_stream *stream_new(int dev, unsigned flags, bool legacy)
{
        struct sim_stream *s = calloc(1, sizeof(*s));
        pthread_condattr_t ca;
        pthread_attr_t ta;

        if (s == NULL)
                return NULL;
        s->dev = dev;
        s->flags = flags;
        s->legacy = legacy;
        s->magic = MAGIC_STREAM;
        pthread_mutex_init(&s->mu, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->cv, &ca);
        pthread_condattr_destroy(&ca);
        pthread_attr_init(&ta);
        pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&s->thread, &ta, stream_main, s) != 0) {
                pthread_attr_destroy(&ta);
                free(s);
                return NULL;
        }
        pthread_attr_destroy(&ta);
        pthread_mutex_lock(&devs[dev].mu);
        s->next_of_dev = devs[dev].streams;
        devs[dev].streams = s;
        pthread_mutex_unlock(&devs[dev].mu);
        return s;
}

struct sim_stream *sim_stream_of(cudaStream_t h, int dev)
{
        struct sim_stream *s = (struct sim_stream *)h;

        if (h == NULL || h == cudaStreamLegacy || h == cudaStreamPerThread) {
                struct device *d = &devs[dev];

                pthread_mutex_lock(&d->mu);
                s = d->legacy;
                pthread_mutex_unlock(&d->mu);
                if (s == NULL) {
                        s = stream_new(dev, 0, true);
                        pthread_mutex_lock(&d->mu);
                        if (d->legacy == NULL)
                                d->legacy = s;
                        s = d->legacy;
                        pthread_mutex_unlock(&d->mu);
                }
                return s;
        }
        return s->magic == MAGIC_STREAM ? s : NULL;
}

static void stream_wait(struct sim_stream *s, uint64_t seq);
static bool push_wait(struct sim_stream *s, struct sim_stream *on, uint64_t seq);
static cudaError_t wait_run(struct sim_op *op);
static void free_arg(struct sim_op *op);

struct wait_arg {
        struct sim_stream *on;
        uint64_t seq;
};

/*
 * The NULL stream's implicit synchronisation (cuda_runtime_api.h): its work
 * waits for the work already queued on the device's blocking streams, and a
 * blocking stream's work waits for the NULL stream's.  Streams made with
 * cudaStreamNonBlocking take part in neither.  The first half is done from
 * the host (a little more waiting than a GPU does, never less).
 */
static void legacy_order(struct sim_stream *s)
{
        struct device *d = &devs[s->dev];

        if (s->legacy) {
                struct sim_stream *list[256];
                size_t n = 0;

                pthread_mutex_lock(&d->mu);
                for (struct sim_stream *t = d->streams; t != NULL && n < 256; t = t->next_of_dev)
                        if (!t->legacy && !(t->flags & cudaStreamNonBlocking))
                                list[n++] = t;
                pthread_mutex_unlock(&d->mu);
                for (size_t i = 0; i < n; i++)
                        sim_stream_sync(list[i]);
        } else if (!(s->flags & cudaStreamNonBlocking)) {
                struct sim_stream *l;
                uint64_t seq;

                pthread_mutex_lock(&d->mu);
                l = d->legacy;
                pthread_mutex_unlock(&d->mu);
                if (l == NULL)
                        return;
                pthread_mutex_lock(&l->mu);
                seq = l->completed < l->enqueued ? l->enqueued : 0;
                pthread_mutex_unlock(&l->mu);
                if (seq != 0 && !push_wait(s, l, seq))
                        stream_wait(l, seq); /* no memory for the op: wait here */
        }
}

/* Appends op to s's queue. */
static void push(struct sim_stream *s, struct sim_op *op)
{
        op->stream = s;
        op->next = NULL;
        op->due_ns = sim_now_ns() + delay_ns;
        pthread_mutex_lock(&s->mu);
        op->seq = ++s->enqueued;
        if (s->tail != NULL)
                s->tail->next = op;
        else
                s->head = op;
        s->tail = op;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
}

/* Queues on s a wait for stream on's work up to seq; false without memory. */
static bool push_wait(struct sim_stream *s, struct sim_stream *on, uint64_t seq)
{
        struct sim_op *op = calloc(1, sizeof(*op));
        struct wait_arg *w = malloc(sizeof(*w));

        if (op == NULL || w == NULL) {
                free(op);
                free(w);
                return false;
        }
        *w = (struct wait_arg){on, seq};
        op->fn = wait_run;
        op->arg = w;
        op->free = free_arg;
        op->what = "stream wait";
        push(s, op);
        return true;
}

void sim_enqueue(struct sim_stream *s, struct sim_op *op)
{
        legacy_order(s);
        push(s, op);
}

/* Releases s up to seq and waits until it ran. */
static void stream_wait(struct sim_stream *s, uint64_t seq)
{
        pthread_mutex_lock(&s->mu);
        if (s->released < seq)
                s->released = seq;
        pthread_cond_broadcast(&s->cv);
        while (s->completed < seq)
                pthread_cond_wait(&s->cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
}

cudaError_t sim_stream_sync(struct sim_stream *s)
{
        uint64_t seq;

        pthread_mutex_lock(&s->mu);
        seq = s->enqueued;
        pthread_mutex_unlock(&s->mu);
        stream_wait(s, seq);
        return sim_sticky();
}

/* Resolves a stream handle of the API; NULL when it is not a live stream. */
static struct sim_stream *stream_arg(cudaStream_t h)
{
        return sim_stream_of(h, cur_dev);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *ps, unsigned flags)
{
        struct sim_stream *s;

        ENTER();
        if (ps == NULL || (flags & ~(unsigned)cudaStreamNonBlocking) != 0)
                return fail(cudaErrorInvalidValue);
        if (n_devs == 0)
                return fail(cudaErrorNoDevice);
        s = stream_new(cur_dev, flags, false);
        if (s == NULL)
                return fail(cudaErrorMemoryAllocation);
        *ps = (cudaStream_t)s;
        return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *ps)
{
        return cudaStreamCreateWithFlags(ps, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t h)
{
        struct sim_stream *s = (struct sim_stream *)h;
        struct device *d;

        ENTER();
        if (h == NULL || h == cudaStreamLegacy || h == cudaStreamPerThread ||
            s->magic != MAGIC_STREAM)
                return fail(cudaErrorInvalidResourceHandle);
        d = &devs[s->dev];
        pthread_mutex_lock(&d->mu);
        for (struct sim_stream **pp = &d->streams; *pp != NULL; pp = &(*pp)->next_of_dev) {
                if (*pp == s) {
                        *pp = s->next_of_dev;
                        break;
                }
        }
        s->next_of_dev = dead_streams;
        dead_streams = s;
        pthread_mutex_unlock(&d->mu);
        /* Queued work still runs (the runtime's documented behaviour); the thread then ends. */
        pthread_mutex_lock(&s->mu);
        s->magic = MAGIC_DEAD;
        s->stop = true;
        s->released = s->enqueued;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
        struct sim_stream *s;

        ENTER();
        if (n_devs == 0)
                return fail(cudaErrorNoDevice);
        s = stream_arg(h);
        if (s == NULL)
                return fail(cudaErrorInvalidResourceHandle);
        return fail(sim_stream_sync(s));
}

cudaError_t cudaStreamQuery(cudaStream_t h)
{
        struct sim_stream *s;
        bool done;

        ENTER();
        if (n_devs == 0)
                return fail(cudaErrorNoDevice);
        s = stream_arg(h);
        if (s == NULL)
                return fail(cudaErrorInvalidResourceHandle);
        pthread_mutex_lock(&s->mu);
        s->released = s->enqueued; /* asking is a reason to go on */
        pthread_cond_broadcast(&s->cv);
        done = s->completed == s->enqueued;
        pthread_mutex_unlock(&s->mu);
        if (sim_sticky() != cudaSuccess)
                return fail(sim_sticky());
        return done ? cudaSuccess : cudaErrorNotReady;
}

/* ---- events ---- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *pe, unsigned flags)
{
        struct event *e;

        ENTER();
        if (pe == NULL || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming |
                                               cudaEventInterprocess)) != 0)
                return fail(cudaErrorInvalidValue);
        e = calloc(1, sizeof(*e));
        if (e == NULL)
                return fail(cudaErrorMemoryAllocation);
        e->magic = MAGIC_EVENT;
        e->flags = flags;
        *pe = (cudaEvent_t)e;
        return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *pe)
{
        return cudaEventCreateWithFlags(pe, cudaEventDefault);
}

static struct event *event_arg(cudaEvent_t h)
{
        struct event *e = (struct event *)h;

        return e != NULL && e->magic == MAGIC_EVENT ? e : NULL;
}

cudaError_t cudaEventDestroy(cudaEvent_t h)
{
        struct event *e = event_arg(h);

        ENTER();
        if (e == NULL)
                return fail(cudaErrorInvalidResourceHandle);
        e->magic = MAGIC_DEAD;
        /* A queued record may still name it: freed only if nothing is pending. */
        if (e->stream == NULL ||
            (pthread_mutex_lock(&e->stream->mu),
             e->stream->completed >= e->seq ? (pthread_mutex_unlock(&e->stream->mu), true)
                                            : (pthread_mutex_unlock(&e->stream->mu), false)))
                free(e);
        return cudaSuccess;
}

struct record_arg {
        struct event *e;
};

static cudaError_t record_run(struct sim_op *op)
{
        struct event *e = op->arg;

        if (e->seq == op->seq && e->stream == op->stream)
                e->time = sim_now_ns();
        return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t h, cudaStream_t hs)
{
        struct event *e = event_arg(h);
        struct sim_stream *s;
        struct sim_op *op;

        ENTER();
        if (e == NULL)
                return fail(cudaErrorInvalidResourceHandle);
        s = stream_arg(hs);
        if (s == NULL)
                return fail(cudaErrorInvalidResourceHandle);
        op = calloc(1, sizeof(*op));
        if (op == NULL)
                return fail(cudaErrorMemoryAllocation);
        op->fn = record_run;
        op->what = "event record";
        op->arg = e;
        /* The record's seq is known once queued; take the stream's lock to publish both. */
        pthread_mutex_lock(&s->mu);
        e->stream = s;
        e->seq = s->enqueued + 1;
        e->recorded = true;
        pthread_mutex_unlock(&s->mu);
        sim_enqueue(s, op);
        return cudaSuccess;
}

static bool event_done(struct event *e)
{
        bool done;

        if (!e->recorded)
                return true;
        pthread_mutex_lock(&e->stream->mu);
        done = e->stream->completed >= e->seq;
        pthread_mutex_unlock(&e->stream->mu);
        return done;
}

cudaError_t cudaEventSynchronize(cudaEvent_t h)
{
        struct event *e = event_arg(h);

        ENTER();
        if (e == NULL)
                return fail(cudaErrorInvalidResourceHandle);
        if (e->recorded)
                stream_wait(e->stream, e->seq);
        return fail(sim_sticky());
}

cudaError_t cudaEventQuery(cudaEvent_t h)
{
        struct event *e = event_arg(h);

        ENTER();
        if (e == NULL)
                return fail(cudaErrorInvalidResourceHandle);
        if (e->recorded) {
                pthread_mutex_lock(&e->stream->mu);
                if (e->stream->released < e->seq)
                        e->stream->released = e->seq;
                pthread_cond_broadcast(&e->stream->cv);
                pthread_mutex_unlock(&e->stream->mu);
        }
        return event_done(e) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
        struct event *ea = event_arg(a), *eb = event_arg(b);

        ENTER();
        if (ms == NULL)
                return fail(cudaErrorInvalidValue);
        if (ea == NULL || eb == NULL || (ea->flags & cudaEventDisableTiming) ||
            (eb->flags & cudaEventDisableTiming) || !ea->recorded || !eb->recorded)
                return fail(cudaErrorInvalidResourceHandle);
        if (!event_done(ea) || !event_done(eb))
                return fail(cudaErrorNotReady);
        *ms = (float)((double)(eb->time - ea->time) / 1e6);
        return cudaSuccess;
}

static cudaError_t wait_run(struct sim_op *op)
{
        struct wait_arg *w = op->arg;

        stream_wait(w->on, w->seq);
        return sim_sticky();
}

static void free_arg(struct sim_op *op)
{
        free(op->arg);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t hs, cudaEvent_t h, unsigned flags)
{
        struct event *e = event_arg(h);
        struct sim_stream *s;

        ENTER();
        if (e == NULL)
                return fail(cudaErrorInvalidResourceHandle);
        if (flags != 0)
                return fail(cudaErrorInvalidValue);
        s = stream_arg(hs);
        if (s == NULL)
                return fail(cudaErrorInvalidResourceHandle);
        if (!e->recorded)
                return cudaSuccess;
        legacy_order(s);
        if (!push_wait(s, e->stream, e->seq))
                return fail(cudaErrorMemoryAllocation);
        return cudaSuccess;
}

/* ---- copies ---- */

struct copy_arg {
        void *dst;
        const void *src;
        size_t n;
        int value;   /* memset: the byte; memcpy: -1 */
        void *owned; /* a snapshot of a pageable source */
};

static cudaError_t copy_run(struct sim_op *op)
{
        struct copy_arg *c = op->arg;

        sim_grant_all(); /* a copy may cross devices (UVA) */
        if (c->value >= 0)
                memset(c->dst, c->value, c->n);
        else
                memcpy(c->dst, c->src, c->n);
        for (int i = 0; i < n_devs; i++)
                if (i != op->stream->dev)
                        revoke_key(devs[i].pkey);
        return cudaSuccess;
}

static void copy_free(struct sim_op *op)
{
        struct copy_arg *c = op->arg;

        free(c->owned);
        free(c);
}

/* What a pointer is: 1 device memory (a live range of n bytes), 0 host, -1 a bad device range. */
static int classify(const void *p, size_t n, int *dev)
{
        size_t len;

        *dev = sim_dev_of(p, &len);
        if (*dev < 0)
                return 0;
        return len >= n && len > 0 ? 1 : -1;
}

static cudaError_t copy(void *dst, const void *src, size_t n, int value, enum cudaMemcpyKind kind,
                        cudaStream_t hs, bool sync)
{
        struct sim_stream *s;
        struct sim_op *op;
        struct copy_arg *c;
        int dd, sd = -1, dk, sk = 0;
        bool pageable_dst = false;

        ENTER();
        if (n_devs == 0)
                return fail(cudaErrorNoDevice);
        s = stream_arg(hs);
        if (s == NULL)
                return fail(cudaErrorInvalidResourceHandle);
        if (n == 0)
                return cudaSuccess;
        if (dst == NULL || (value < 0 && src == NULL))
                return fail(cudaErrorInvalidValue);
        dk = classify(dst, n, &dd);
        if (value < 0)
                sk = classify(src, n, &sd);
        if (dk < 0 || sk < 0)
                return fail(cudaErrorInvalidValue); /* runs past its allocation */
        if (value >= 0) {
                if (dk == 0 && !sim_is_pinned(dst, n))
                        return fail(cudaErrorInvalidValue);
        } else {
                switch (kind) {
                case cudaMemcpyHostToDevice:
                        if (dk != 1 || sk != 0)
                                return fail(cudaErrorInvalidValue);
                        break;
                case cudaMemcpyDeviceToHost:
                        if (dk != 0 || sk != 1)
                                return fail(cudaErrorInvalidValue);
                        break;
                case cudaMemcpyDeviceToDevice:
                        if (dk != 1 || sk != 1)
                                return fail(cudaErrorInvalidValue);
                        break;
                case cudaMemcpyHostToHost:
                        if (dk != 0 || sk != 0)
                                return fail(cudaErrorInvalidValue);
                        break;
                case cudaMemcpyDefault:
                        break;
                default:
                        return fail(cudaErrorInvalidMemcpyDirection);
                }
                pageable_dst = dk == 0 && !sim_is_pinned(dst, n);
        }
        op = calloc(1, sizeof(*op));
        c = calloc(1, sizeof(*c));
        if (op == NULL || c == NULL) {
                free(op);
                free(c);
                return fail(cudaErrorMemoryAllocation);
        }
        *c = (struct copy_arg){dst, src, n, value, NULL};
        /* From pageable memory the runtime stages the source before returning. */
        if (value < 0 && sk == 0 && !sim_is_pinned(src, n)) {
                c->owned = malloc(n);
                if (c->owned == NULL) {
                        free(op);
                        free(c);
                        return fail(cudaErrorMemoryAllocation);
                }
                memcpy(c->owned, src, n);
                c->src = c->owned;
        }
        op->fn = copy_run;
        op->what = value >= 0 ? "memset" : "memcpy";
        op->free = copy_free;
        op->arg = c;
        sim_enqueue(s, op);
        /* To pageable memory, and the synchronous calls, return once the copy is done. */
        if (sync || pageable_dst)
                return fail(sim_stream_sync(s));
        return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
        return copy(dst, src, n, -1, kind, s, false);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
        return copy(dst, src, n, -1, kind, NULL, true);
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s)
{
        return copy(dst, NULL, n, value & 0xff, cudaMemcpyDefault, s, false);
}

cudaError_t cudaMemset(void *dst, int value, size_t n)
{
        return copy(dst, NULL, n, value & 0xff, cudaMemcpyDefault, NULL, true);
}

/* ---- launches and fault injection ---- */

int sim_launch_fate(void)
{
        uint64_t n = atomic_fetch_add(&n_launch, 1) + 1;

        if (atomic_load(&fault_at) == n)
                return 2;
        if (atomic_load(&fail_at) == n)
                return 1;
        return 0;
}

void cudasim_arm_oom(int dev, unsigned n)
{
        pthread_once(&once, init);
        if (dev < 0 || dev >= n_devs)
                return;
        pthread_mutex_lock(&devs[dev].mu);
        devs[dev].oom_at = devs[dev].n_malloc + n;
        pthread_mutex_unlock(&devs[dev].mu);
}

void cudasim_arm_fault(unsigned n)
{
        atomic_store(&fault_at, atomic_load(&n_launch) + n);
}

void cudasim_arm_launch_fail(unsigned n)
{
        atomic_store(&fail_at, atomic_load(&n_launch) + n);
}

/* One of device dev's counters, read under its lock (0 for a device that is not there). */
static uint64_t dev_counter(int dev, size_t field)
{
        uint64_t n;

        pthread_once(&once, init);
        if (dev < 0 || dev >= n_devs)
                return 0;
        pthread_mutex_lock(&devs[dev].mu);
        n = field == offsetof(struct device, used) ? devs[dev].used
                                                   : *(uint64_t *)((char *)&devs[dev] + field);
        pthread_mutex_unlock(&devs[dev].mu);
        return n;
}

uint64_t cudasim_malloc_count(int dev)
{
        return dev_counter(dev, offsetof(struct device, n_malloc));
}

int cudasim_host_reads_fault(void)
{
        pthread_once(&once, init);
        return have_pku;
}

uint64_t cudasim_free_count(int dev)
{
        return dev_counter(dev, offsetof(struct device, n_free));
}

uint64_t cudasim_launch_count(void)
{
        return atomic_load(&n_launch);
}

size_t cudasim_device_used(int dev)
{
        return (size_t)dev_counter(dev, offsetof(struct device, used));
}
