// metrics/ — NCCLWATCH_METRICS_FILE: the process's communicators, resources, ops and stalls as
// Prometheus text, rewritten by a thread of its own while the job runs and once more at exit
// (live_metrics.h).
//
// May include: process/, comms/, trace/ (the lost-record count), gpu/ (whether GPU completion is
// known).
//
// Its one header is used outside the folder: this front door only forwards to it.
#pragma once

#include "metrics/live_metrics.h"
