/* The served directory: SMB2 names turned into paths confined to the root, and the openat2
 * calls that keep them there ([MS-SMB2] 3.3.5.9 names; Linux openat2(2) RESOLVE_BENEATH). */
#ifndef SMB_SRV_FS_H
#define SMB_SRV_FS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define SRV_PATH_MAX 1024

/* An SMB2 path name (UTF-16LE, '\' separators, relative to the share) as a relative POSIX
 * path in out ("" is the share's root). STATUS_SUCCESS, or: STATUS_ACCESS_DENIED for a ".."
 * component (a path climbing out of the share); STATUS_INVALID_PARAMETER for a leading '\'
 * when lead_ok is 0 ([MS-SMB2] 3.3.5.9); STATUS_OBJECT_NAME_INVALID for an empty component,
 * '/', ':' (streams), a NUL, bad UTF-16 or a path longer than SRV_PATH_MAX. */
uint32_t srv_path_from_wire(const uint8_t *name, size_t len, int lead_ok, char *out, size_t cap);

/* openat2(root, rel, flags, mode) with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS: a symlink
 * that leads out of the root fails with -EXDEV. The fd, or a negative errno. */
int srv_open_beneath(int root, const char *rel, int flags, mode_t mode);

/* Opens rel's parent directory beneath root (O_PATH) and points *base at rel's last
 * component. The fd or a negative errno; -EINVAL for the root itself. */
int srv_open_parent(int root, const char *rel, const char **base);

/* The NTSTATUS for an errno of a path operation; parent says the lookup was of a path's
 * directories (ENOENT is then STATUS_OBJECT_PATH_NOT_FOUND). */
uint32_t srv_errno_status(int err, int parent);

/* A stat and the birth time ({0, 0} where the file system keeps none). */
struct srv_stat {
    struct stat st;
    struct timespec birth;
};
/* statx(fd, STATX_BASIC_STATS | STATX_BTIME); 0 or -1 with errno. */
int srv_fstat(int fd, struct srv_stat *s);

/* Windows FILETIME (100 ns since 1601) of a timespec, and back. */
uint64_t srv_filetime(const struct timespec *ts);
struct timespec srv_timespec(uint64_t ft);

/* FILE_ATTRIBUTE_* of a stat ([MS-FSCC] 2.6). */
uint32_t srv_attributes(const struct stat *st);

/* Case-insensitive match of name against a pattern with '*' and '?' (and the DOS forms '<',
 * '>', '"' treated as '*', '?', '.') ([MS-FSA] 2.1.4.4 simplified). */
int srv_name_match(const char *pattern, const char *name);

#endif
