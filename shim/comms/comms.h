// comms/ — what the shim knows of each communicator and resource it saw made. The lock-free table
// the collective path reads by handle: identity, rank, seq counters, stalls (comm_table.h); the
// registry of what is alive now, in fixed-size entries the exit alert reads from a signal handler
// (registry.h); communicator identities that agree on every rank (identity.h).
//
// May include: process/.
//
// Every header here is used outside the folder: this front door only gathers them.
#pragma once

#include "comms/comm_table.h"
#include "comms/identity.h"
#include "comms/registry.h"
