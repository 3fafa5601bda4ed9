/*
 * repository.h: the model repository on disk (DESIGN.md §3):
 *   <root>/<model>/config.json
 *   <root>/<model>/<version>/<weights file>     version: positive integer
 * Scanning reads every config and lists the versions its policy selects;
 * loading a version builds an rnnd_model_t.  A model that fails keeps a reason.
 */
#ifndef RNND_ENGINE_REPOSITORY_H
#define RNND_ENGINE_REPOSITORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "model.h"
#include "modelcfg.h"

#define RNND_REPOSITORY_MAX_MODELS 4096u

struct rnnd_repository_model {
        char name[RNND_CFG_NAME_MAX]; /* directory name: [A-Za-z0-9_.-], not starting with '.' */
        int status;                   /* 0, or the negative RNND_E* that made it unusable */
        char reason[256];             /* why, when status < 0 */
        struct rnnd_model_config cfg; /* valid when status == 0 */
        uint32_t n_versions;          /* versions the policy selects, ascending */
        uint64_t versions[RNND_CFG_MAX_VERSIONS];
};

/* Most skipped entries a scan keeps (n_skipped_more counts the rest). */
#define RNND_REPOSITORY_MAX_SKIPPED 64u

/* An entry of the repository that a scan passed over, and why (for the daemon's log). */
struct rnnd_repository_skipped {
        char name[RNND_CFG_NAME_MAX + 256]; /* "<entry>" under root, or "<model>/<entry>" */
        char reason[160];                   /* why it is no model or no version */
        bool is_dir; /* a directory (false: a file or other non-directory at root) */
};

struct rnnd_repository_index {
        struct rnnd_repository_model *models; /* sorted by name */
        size_t n_models;
        struct rnnd_repository_skipped *skipped; /* in the order the scan met them, or NULL */
        size_t n_skipped;
        size_t n_skipped_more; /* skipped entries past RNND_REPOSITORY_MAX_SKIPPED */
};

/*
 * Scans root into *ret.  Directories with invalid names, and files, are
 * skipped; every other directory is a model: a missing or invalid config.json,
 * no version directory, or a policy that selects a version that is not there
 * gives that model a status < 0 and a reason (paths in it relative to root,
 * since clients see it), and the scan goes on.  Version
 * directories are positive decimal integers without leading zeros; others are
 * ignored.  What is skipped, but for hidden entries (names starting with '.')
 * and a model's files, is listed in ret->skipped with the reason, for the
 * daemon to log.  Errors (for root itself): RNND_EIO, RNND_ELIMIT (too many
 * models), RNND_ENOMEM.  Never writes *ret on failure.  Thread-safe.
 */
int rnnd_repository_scan(const char *root, struct rnnd_repository_index *ret, rnnd_error_t *reterr);

/* Frees what idx owns and zeroes it.  Accepts a zeroed index. */
void rnnd_repository_index_done(struct rnnd_repository_index *idx);

/* Whether s can name a model: 1..127 bytes of [A-Za-z0-9_.-], not starting with '.'. */
bool rnnd_repository_valid_name(const char *s);

/* The entry called name, or NULL.  Borrowed until rnnd_repository_index_done(). */
const struct rnnd_repository_model *rnnd_repository_find(const struct rnnd_repository_index *idx,
                                                         const char *name);

/*
 * Reads and validates <model_dir>/config.json into *ret (RNND_CFG_MAX_FILE_BYTES
 * at most).  Errors: RNND_EIO, RNND_EMODEL, RNND_ELIMIT.  Thread-safe.
 */
int rnnd_repository_read_config(const char *model_dir, struct rnnd_model_config *ret,
                                rnnd_error_t *reterr);

/*
 * Loads version of model m (an entry with status 0) from root.  On success
 * *ret is a new reference.  Errors as rnnd_model_load(), their paths relative
 * to root.  Thread-safe.
 */
int rnnd_repository_load(const char *root, const struct rnnd_repository_model *m, uint64_t version,
                         rnnd_model_t **ret, rnnd_error_t *reterr);

#endif
