/* Paths confined to the share's root (see srv_fs.h). */
#include "srv_fs.h"
#include "srv_utf16.h"
#include "srv_wire.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define STATUS_UNSUCCESSFUL 0xC0000001u

uint32_t srv_path_from_wire(const uint8_t *name, size_t len, int lead_ok, char *out, size_t cap)
{
    char tmp[SRV_PATH_MAX * 2];
    if (len % 2)
        return STATUS_OBJECT_NAME_INVALID;
    if (len == 0) {
        out[0] = 0;
        return STATUS_SUCCESS;
    }
    if (srv_utf16_to_utf8(name, len, tmp, sizeof tmp))
        return STATUS_OBJECT_NAME_INVALID;
    const char *p = tmp;
    if (*p == '\\') {
        if (!lead_ok)
            return STATUS_INVALID_PARAMETER;
        while (*p == '\\')
            p++;
    }
    size_t n = 0;
    while (*p) {
        const char *e = strchr(p, '\\');
        size_t cl = e ? (size_t)(e - p) : strlen(p);
        if (cl == 0) {
            if (!e[1]) /* one trailing '\' is accepted ("dir\") */
                break;
            return STATUS_OBJECT_NAME_INVALID;
        }
        if (cl == 2 && p[0] == '.' && p[1] == '.')
            return STATUS_ACCESS_DENIED;
        if (memchr(p, '/', cl) || memchr(p, ':', cl))
            return STATUS_OBJECT_NAME_INVALID;
        if (!(cl == 1 && p[0] == '.')) {
            if (n + cl + 2 > cap || n + cl + 2 > SRV_PATH_MAX)
                return STATUS_OBJECT_NAME_INVALID;
            if (n)
                out[n++] = '/';
            memcpy(out + n, p, cl);
            n += cl;
        }
        p += cl;
        if (*p == '\\')
            p++;
    }
    out[n] = 0;
    return STATUS_SUCCESS;
}

int srv_open_beneath(int root, const char *rel, int flags, mode_t mode)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (uint64_t)(flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY));
    how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, root, *rel ? rel : ".", &how, sizeof how);
    return fd < 0 ? -errno : (int)fd;
}

int srv_open_parent(int root, const char *rel, const char **base)
{
    if (!*rel)
        return -EINVAL;
    const char *slash = strrchr(rel, '/');
    char dir[SRV_PATH_MAX];
    if (slash) {
        size_t dl = (size_t)(slash - rel);
        memcpy(dir, rel, dl);
        dir[dl] = 0;
        *base = slash + 1;
    } else {
        dir[0] = 0;
        *base = rel;
    }
    return srv_open_beneath(root, dir, O_PATH | O_DIRECTORY, 0);
}

uint32_t srv_errno_status(int err, int parent)
{
    switch (err) {
    case ENOENT:
        return parent ? STATUS_OBJECT_PATH_NOT_FOUND : STATUS_OBJECT_NAME_NOT_FOUND;
    case ENOTDIR:
        return STATUS_OBJECT_PATH_NOT_FOUND;
    case EXDEV: /* a symlink leading out of the root */
    case EACCES:
    case EPERM:
    case EROFS:
        return STATUS_ACCESS_DENIED;
    case EEXIST:
        return STATUS_OBJECT_NAME_COLLISION;
    case EISDIR:
        return STATUS_FILE_IS_A_DIRECTORY;
    case ENOTEMPTY:
        return STATUS_DIRECTORY_NOT_EMPTY;
    case ENOSPC:
    case EDQUOT:
        return STATUS_DISK_FULL;
    case EMFILE:
    case ENFILE:
        return STATUS_TOO_MANY_OPENED_FILES;
    case ENAMETOOLONG:
    case ELOOP:
        return STATUS_OBJECT_NAME_INVALID;
    case EINVAL:
        return STATUS_INVALID_PARAMETER;
    case ENOMEM:
        return STATUS_INSUFFICIENT_RESOURCES;
    default:
        return STATUS_UNSUCCESSFUL;
    }
}

int srv_fstat(int fd, struct srv_stat *s)
{
    struct statx x;
    memset(s, 0, sizeof *s);
    if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_BTIME, &x))
        return -1;
    s->st.st_dev = makedev(x.stx_dev_major, x.stx_dev_minor);
    s->st.st_ino = x.stx_ino;
    s->st.st_mode = x.stx_mode;
    s->st.st_nlink = x.stx_nlink;
    s->st.st_uid = x.stx_uid;
    s->st.st_gid = x.stx_gid;
    s->st.st_size = (off_t)x.stx_size;
    s->st.st_blksize = (blksize_t)x.stx_blksize;
    s->st.st_blocks = (blkcnt_t)x.stx_blocks;
    s->st.st_atim.tv_sec = x.stx_atime.tv_sec;
    s->st.st_atim.tv_nsec = x.stx_atime.tv_nsec;
    s->st.st_mtim.tv_sec = x.stx_mtime.tv_sec;
    s->st.st_mtim.tv_nsec = x.stx_mtime.tv_nsec;
    s->st.st_ctim.tv_sec = x.stx_ctime.tv_sec;
    s->st.st_ctim.tv_nsec = x.stx_ctime.tv_nsec;
    if (x.stx_mask & STATX_BTIME) {
        s->birth.tv_sec = x.stx_btime.tv_sec;
        s->birth.tv_nsec = x.stx_btime.tv_nsec;
    }
    return 0;
}

#define FILETIME_UNIX_EPOCH 116444736000000000ull

uint64_t srv_filetime(const struct timespec *ts)
{
    if (ts->tv_sec < -11644473600LL)
        return 0;
    return (uint64_t)(ts->tv_sec + 11644473600LL) * 10000000ull + (uint64_t)ts->tv_nsec / 100u;
}

struct timespec srv_timespec(uint64_t ft)
{
    struct timespec ts;
    if (ft < FILETIME_UNIX_EPOCH) {
        ts.tv_sec = 0;
        ts.tv_nsec = 0;
        return ts;
    }
    ft -= FILETIME_UNIX_EPOCH;
    ts.tv_sec = (time_t)(ft / 10000000u);
    ts.tv_nsec = (long)(ft % 10000000u) * 100;
    return ts;
}

uint32_t srv_attributes(const struct stat *st)
{
    uint32_t a = S_ISDIR(st->st_mode) ? 0x10u /* DIRECTORY */ : 0x20u /* ARCHIVE */;
    if (!(st->st_mode & S_IWUSR))
        a |= 0x01u; /* READONLY */
    return a;
}

static char dos_wild(char c)
{
    return c == '<' ? '*' : c == '>' ? '?' : c == '"' ? '.' : c;
}

/* Iterative with one backtrack point (the last '*'): O(pattern x name), whatever the pattern
 * (a recursive matcher is exponential in the number of stars). */
int srv_name_match(const char *pat, const char *name)
{
    const char *star = NULL, *resume = NULL;
    while (*name) {
        char pc = dos_wild(*pat);
        if (pc == '*') {
            star = ++pat;
            resume = name;
            continue;
        }
        if (pc && (pc == '?' || tolower((unsigned char)pc) == tolower((unsigned char)*name))) {
            pat++;
            name++;
            continue;
        }
        if (!star)
            return 0;
        pat = star;
        name = ++resume;
    }
    while (dos_wild(*pat) == '*')
        pat++;
    return *pat == 0;
}
