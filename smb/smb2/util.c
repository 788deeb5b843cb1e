/* Error messages and the debug log of the SMB2 client. */
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int smb2_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EPROTO;
}

int smb2_log_enabled(void)
{
    const char *v = getenv("SOFTNDK_SMB_LOG");
    return v && *v && !(v[0] == '0' && v[1] == '\0');
}

void smb2_log(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "smb2: %s\n", line);
}
