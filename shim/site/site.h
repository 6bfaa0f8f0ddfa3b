// site/ — where an NCCL call came from. Native return addresses and the modules they fall in,
// with kModule records for the analyzers to symbolize offline, plus one readable line for the
// exit alert (callsite.h); the Python lines that led there, read from the calling thread's own
// Python stack without the GIL (python_site.h), through per-version layouts of CPython's structs
// (python_layouts.h).
//
// May include: process/, resolve/ (real_dlsym, is_inside_shim), trace/ (kModule and Stacks records).
//
// Every Python thread's stack, and the native stack of the thread that issued the stalled op
// (native_stack.h: scanned from /proc without stopping it), when a hang is suspected
// (stack_requests.h).
//
// Both read this process's memory through own_memory.h: never with a system call a sandbox may kill on.
//
// The Python exception a program dies of, read in Python's own atexit (python_exception.h).
//
// Front door: callsite.h, python_exception.h, python_site.h, stack_requests.h. Inside: python_layouts.h, native_stack.h,
// own_memory.h.
#pragma once

#include "site/callsite.h"
#include "site/python_exception.h"
#include "site/python_site.h"
#include "site/stack_requests.h"
