// gpu/ — everything that calls the CUDA driver, loaded at run time (cuda_driver.h). GPU timing and
// the stall watchdog (gpu_timer.h): the launch path on application threads (gpu_timer.cc) hands
// launches to the collector thread (gpu_collector.cc) through lock-free rings (gpu_state.h,
// spsc_ring.h); the collector maps event times onto the host clock (gpu_clock_refs.h) and reports
// stalls (gpu_watchdog.h). And the GPU memory a communicator holds (comm_memory.h).
//
// May include: process/, comms/ (completion raises a communicator's seq), resolve/ (real_dlsym;
// ncclCommMemStats), trace/ (timing records, stall records), site/ (the Python stacks at a stall).
//
// Front door: gpu_timer.h, comm_memory.h. Inside: the rest.
#pragma once

#include "gpu/comm_memory.h"
#include "gpu/gpu_timer.h"
