/* Little-endian field access, SMB2 command codes and the NTSTATUS values the server returns
 * ([MS-SMB2] 2.2, [MS-ERREF] 2.3). Every read goes through a bounds-checked cursor or a
 * length check at the caller; nothing here dereferences an unaligned pointer. */
#ifndef SMB_SRV_WIRE_H
#define SMB_SRV_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}
static inline void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void wr32(uint8_t *p, uint32_t v)
{
    wr16(p, (uint16_t)v);
    wr16(p + 2, (uint16_t)(v >> 16));
}
static inline void wr64(uint8_t *p, uint64_t v)
{
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

/* [MS-SMB2] 2.2.1 the SMB2 header */
#define SMB2_HDR_LEN           64u
#define SMB2_HDR_CREDIT_CHARGE 6
#define SMB2_HDR_STATUS        8
#define SMB2_HDR_COMMAND       12
#define SMB2_HDR_CREDIT        14
#define SMB2_HDR_FLAGS         16
#define SMB2_HDR_NEXT          20
#define SMB2_HDR_MESSAGE_ID    24
#define SMB2_HDR_TREE_ID       36
#define SMB2_HDR_SESSION_ID    40
#define SMB2_HDR_SIGNATURE     48

#define SMB2_FLAGS_SERVER_TO_REDIR    0x00000001u
#define SMB2_FLAGS_ASYNC_COMMAND      0x00000002u
#define SMB2_FLAGS_RELATED_OPERATIONS 0x00000004u
#define SMB2_FLAGS_SIGNED             0x00000008u

enum smb2_command {
    SMB2_NEGOTIATE = 0,
    SMB2_SESSION_SETUP = 1,
    SMB2_LOGOFF = 2,
    SMB2_TREE_CONNECT = 3,
    SMB2_TREE_DISCONNECT = 4,
    SMB2_CREATE = 5,
    SMB2_CLOSE = 6,
    SMB2_FLUSH = 7,
    SMB2_READ = 8,
    SMB2_WRITE = 9,
    SMB2_LOCK = 10,
    SMB2_IOCTL = 11,
    SMB2_CANCEL = 12,
    SMB2_ECHO = 13,
    SMB2_QUERY_DIRECTORY = 14,
    SMB2_CHANGE_NOTIFY = 15,
    SMB2_QUERY_INFO = 16,
    SMB2_SET_INFO = 17,
    SMB2_OPLOCK_BREAK = 18,
};

/* [MS-ERREF] 2.3.1 */
#define STATUS_SUCCESS                  0x00000000u
#define STATUS_NO_MORE_FILES            0x80000006u
#define STATUS_BUFFER_OVERFLOW          0x80000005u
#define STATUS_INVALID_INFO_CLASS       0xC0000003u
#define STATUS_INFO_LENGTH_MISMATCH     0xC0000004u
#define STATUS_INVALID_HANDLE           0xC0000008u
#define STATUS_INVALID_PARAMETER        0xC000000Du
#define STATUS_NO_SUCH_FILE             0xC000000Fu
#define STATUS_INVALID_DEVICE_REQUEST   0xC0000010u
#define STATUS_END_OF_FILE              0xC0000011u
#define STATUS_MORE_PROCESSING_REQUIRED 0xC0000016u
#define STATUS_ACCESS_DENIED            0xC0000022u
#define STATUS_BUFFER_TOO_SMALL         0xC0000023u
#define STATUS_OBJECT_NAME_INVALID      0xC0000033u
#define STATUS_OBJECT_NAME_NOT_FOUND    0xC0000034u
#define STATUS_OBJECT_NAME_COLLISION    0xC0000035u
#define STATUS_OBJECT_PATH_NOT_FOUND    0xC000003Au
#define STATUS_SHARING_VIOLATION        0xC0000043u
#define STATUS_DELETE_PENDING           0xC0000056u
#define STATUS_LOGON_FAILURE            0xC000006Du
#define STATUS_DISK_FULL                0xC000007Fu
#define STATUS_INSUFFICIENT_RESOURCES   0xC000009Au
#define STATUS_FILE_IS_A_DIRECTORY      0xC00000BAu
#define STATUS_NOT_SUPPORTED            0xC00000BBu
#define STATUS_NETWORK_NAME_DELETED     0xC00000C9u
#define STATUS_BAD_NETWORK_NAME         0xC00000CCu
#define STATUS_DIRECTORY_NOT_EMPTY      0xC0000101u
#define STATUS_NOT_A_DIRECTORY          0xC0000103u
#define STATUS_TOO_MANY_OPENED_FILES    0xC000011Fu
#define STATUS_CANNOT_DELETE            0xC0000121u
#define STATUS_FILE_CLOSED              0xC0000128u
#define STATUS_USER_SESSION_DELETED     0xC0000203u
#define STATUS_NOT_FOUND                0xC0000225u
#define STATUS_REQUEST_NOT_ACCEPTED     0xC00000D0u

#endif
