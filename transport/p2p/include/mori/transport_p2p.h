// SPDX-License-Identifier: MIT
/* Transport: load/store over XGMI, NVLink or shared memory. Maps every LSA
 * peer's memory into its slot of the flat window. */
#ifndef MORI_TRANSPORT_P2P_H
#define MORI_TRANSPORT_P2P_H

#include "mori/plugin.h"

MORI_EXTERN_C_BEGIN
extern MORI_API const mori_transport_ops_t mori_transport_p2p_ops;
MORI_EXTERN_C_END

#endif
