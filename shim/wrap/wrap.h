// wrap/ — the NCCL functions the shim exports, its face to the application: collectives,
// point-to-point calls and groups, the hot path (collectives.cc); communicator lifecycle
// (lifecycle.cc); resources (resources.cc); and what every wrapper shares: the re-entrancy guard,
// call ids, ApiEvents and the wrapper's opening (recorder.h).
//
// May include: every other folder (process/, comms/, resolve/, trace/, site/, gpu/, metrics/,
// exit/).
//
// Nothing in the shim includes wrap/: the wrappers are declared by NCCL's own headers (nccl.h,
// resolve/nccl_api.h), and the application, the dynamic linker and resolve/bound_wrappers.cc reach
// them by name. So this front door declares nothing; it is here to say so.
#pragma once
