/* Small helpers shared by the SMB2 client's files. */
#ifndef SMB_SMB2_UTIL_H
#define SMB_SMB2_UTIL_H

#include <stddef.h>

/* Writes the message into err (when errlen > 0) and returns -EPROTO. */
int smb2_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Debug log to stderr when SOFTNDK_SMB_LOG is set (any value but "0"). */
int smb2_log_enabled(void);
void smb2_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
