/*++

Module Name:

    names.h

Abstract:

    Shared definitions of the names driver (names_driver.c, wsktcp.c).

--*/

#pragma once

#include <ntddk.h>
#include <wdmsec.h>
#include <wsk.h>
#include <wskndk.h>
#include <netioapi.h>
#include <wchar.h>

#define NAMES_TAG 'mNdS'

#define NamesLog(...) DbgPrintEx(DPFLTR_IHVDRIVER_ID, DPFLTR_ERROR_LEVEL, __VA_ARGS__)

#define NAMES_CHECK(cond, status)                                                                  \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            NamesLog("names-driver: check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
            return (status);                                                                       \
        }                                                                                          \
    } while (0)

//
// The TCP path over WSK sockets: serve and call itself on loopback (wsktcp.c).
//
NTSTATUS NamesWskTcp(const WSK_PROVIDER_NPI *Provider, ADDRESS_FAMILY Family);
