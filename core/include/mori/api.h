// SPDX-License-Identifier: MIT
/* Export macro and common includes for mori's public C API. */
#ifndef MORI_API_H
#define MORI_API_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define MORI_API __attribute__((visibility("default")))
#else
#define MORI_API
#endif

#ifdef __cplusplus
#define MORI_EXTERN_C_BEGIN extern "C" {
#define MORI_EXTERN_C_END }
#else
#define MORI_EXTERN_C_BEGIN
#define MORI_EXTERN_C_END
#endif

#endif /* MORI_API_H */
